"""cosign key-based image signatures, checked: whether an image digest carries at least one
signature that verifies under one of a policy's public keys and names that digest.

The format is cosign's (what ``cosign sign --key`` pushes): the tag ``sha256-<hex>.sig`` in the
image's repository holds an OCI manifest whose layers of media type
``application/vnd.dev.cosign.simplesigning.v1+json`` are "simple signing" payloads, each with its
signature, base64, in the layer annotation ``dev.cosignproject.cosign/signature``. A payload's
``critical.image.docker-manifest-digest`` must be the digest being verified, so a signature copied
to another image's tag is refused. Keys are PEM public keys (``PUBLIC KEY``): ECDSA P-256 as
``cosign generate-key-pair`` writes them (ASN.1 signatures over SHA-256), RSA (PKCS#1 v1.5 over
SHA-256) and Ed25519.

Pure: it parses and verifies the bytes it is given; fetching them is ``fleetwright.registry``'s.
Errors are permanent (a signature that does not verify cannot start to): an unreadable key names
its Secret entry.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from fleetwright.errors import PermanentError

SIGNATURE_LAYER = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
KEY_SUFFIX = ".pub"

PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey


class ImageSignatureError(PermanentError):
    """An image's digest has no signature that verifies under the policy's keys (unsigned, signed
    by another key, or a signature over another digest)."""

    reason = "ImageSignatureRefused"


class InvalidSignatureKeyError(PermanentError):
    """A key of the policy's Secret is not a PEM public key of a supported type."""

    reason = "InvalidSignatureKey"


@dataclass(frozen=True)
class NamedKey:
    """A public key and the Secret entry it came from (what a verdict names)."""

    name: str
    key: PublicKey


@dataclass(frozen=True)
class SignatureLayer:
    """One simple-signing layer of a ``.sig`` manifest: its payload bytes and base64 signature."""

    payload: bytes
    signature: str


def signature_tag(digest: str) -> str:
    """The tag cosign stores ``digest``'s signatures under: ``sha256-<hex>.sig``."""
    algorithm, _, hexdigest = digest.partition(":")
    return f"{algorithm}-{hexdigest}.sig"


def load_keys(entries: Mapping[str, str], source: str) -> tuple[NamedKey, ...]:
    """Every ``*.pub`` entry of ``entries`` (a Secret's decoded data) as a key, in name order;
    an entry that is not a supported PEM public key is an error naming ``source`` and the entry."""
    keys = []
    for name in sorted(n for n in entries if n.endswith(KEY_SUFFIX)):
        try:
            key = serialization.load_pem_public_key(entries[name].encode())
        except ValueError:
            raise InvalidSignatureKeyError(f"{source}[{name}]: not a PEM public key") from None
        if not isinstance(key, PublicKey):
            raise InvalidSignatureKeyError(
                f"{source}[{name}]: {type(key).__name__} keys are not supported (ECDSA, RSA, Ed25519)"
            )
        keys.append(NamedKey(name, key))
    if not keys:
        raise InvalidSignatureKeyError(f"{source}: no *{KEY_SUFFIX} entry holds a public key")
    return tuple(keys)


def signature_layers(manifest: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(blob digest, base64 signature) of each simple-signing layer of a ``.sig`` manifest that
    carries a signature annotation."""
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        return ()
    found = []
    for layer in layers:
        if not isinstance(layer, dict) or layer.get("mediaType") != SIGNATURE_LAYER:
            continue
        annotations = layer.get("annotations") or {}
        signature = annotations.get(SIGNATURE_ANNOTATION) if isinstance(annotations, dict) else None
        digest = layer.get("digest")
        if isinstance(signature, str) and isinstance(digest, str):
            found.append((digest, signature))
    return tuple(found)


def verify(digest: str, layers: tuple[SignatureLayer, ...], keys: tuple[NamedKey, ...]) -> str:
    """The name of the key one of ``layers`` verifies under over ``digest``; else
    ``ImageSignatureError`` saying why (no signature, no key verifies one, or the verifying
    signature names another digest)."""
    if not layers:
        raise ImageSignatureError(f"{digest}: no cosign signature ({signature_tag(digest)} has none)")
    other_digests = []
    for layer in layers:
        key = _verifying_key(layer, keys)
        if key is None:
            continue
        signed = _signed_digest(layer.payload)
        if signed == digest:
            return key.name
        other_digests.append(signed or "no digest")
    if other_digests:
        raise ImageSignatureError(
            f"{digest}: the signature by a trusted key is over {other_digests[0]}, not this digest"
        )
    names = ", ".join(k.name for k in keys)
    raise ImageSignatureError(f"{digest}: no signature verifies under the policy's keys ({names})")


def blob_matches(blob: bytes, digest: str) -> bool:
    """Whether ``blob``'s sha256 is ``digest`` (a registry must not substitute a payload)."""
    return digest == "sha256:" + hashlib.sha256(blob).hexdigest()


def _verifying_key(layer: SignatureLayer, keys: tuple[NamedKey, ...]) -> NamedKey | None:
    try:
        signature = base64.b64decode(layer.signature, validate=True)
    except (binascii.Error, ValueError):
        return None
    return next((k for k in keys if _verifies(k.key, signature, layer.payload)), None)


def _verifies(key: PublicKey, signature: bytes, payload: bytes) -> bool:
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, payload, padding.PKCS1v15(), hashes.SHA256())
        else:
            key.verify(signature, payload)
    except InvalidSignature:
        return False
    return True


def _signed_digest(payload: bytes) -> str | None:
    """``critical.image.docker-manifest-digest`` of a simple-signing payload (None if absent)."""
    try:
        document = json.loads(payload)
    except ValueError:
        return None
    critical = document.get("critical") if isinstance(document, dict) else None
    image = critical.get("image") if isinstance(critical, dict) else None
    signed = image.get("docker-manifest-digest") if isinstance(image, dict) else None
    return signed if isinstance(signed, str) else None
