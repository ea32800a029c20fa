"""The image signatures a DeploymentPolicy requires of its package images (cosign, key-based).
Checking a signature is ``fleetwright.signatures``' job. Must not do I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleetwright.api.common import MAX_NAME, ApiModel

# A Secret's name is a DNS subdomain.
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class ImageSignatures(ApiModel):
    """The cosign key-based signatures every package image of a rollout must carry."""

    mode: Literal["enforce", "warn"] = Field(
        description="enforce: a generation whose package image has no signature by one of the keys over "
        "the digest it resolved to is refused before any node is cordoned (the rollout is Halted naming "
        "the image, digest and reason). warn: it rolls out, and status names each such image."
    )
    keys_secret: str = Field(
        description="A Secret in the package namespace (settings.engine.package_namespace) whose every "
        "*.pub entry is a PEM public key (cosign generate-key-pair's cosign.pub; ECDSA, RSA or Ed25519). "
        "A signature by any of them is accepted: keep two entries while rotating keys. Read when a "
        "generation starts.",
        max_length=MAX_NAME,
        pattern=DNS_SUBDOMAIN_PATTERN,
    )
