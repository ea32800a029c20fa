"""cosign key-based signatures made in Python for the unit and workflow tiers: key pairs as PEM,
simple-signing payloads and their signatures, in the format ``cosign sign --key`` pushes (the
integration tier signs with the real cosign binary instead)."""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from fleetwright.signatures import SignatureLayer

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey


def ecdsa_key() -> ec.EllipticCurvePrivateKey:
    """A P-256 key, as ``cosign generate-key-pair`` makes."""
    return ec.generate_private_key(ec.SECP256R1())


def public_pem(key: PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def payload(repository: str, digest: str) -> bytes:
    """A simple-signing payload naming ``digest`` (cosign's field names)."""
    document = {
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    return json.dumps(document).encode()


def sign(key: PrivateKey, data: bytes) -> str:
    """``data``'s signature by ``key``, base64, as the layer annotation holds it."""
    if isinstance(key, ec.EllipticCurvePrivateKey):
        raw = key.sign(data, ec.ECDSA(hashes.SHA256()))
    elif isinstance(key, rsa.RSAPrivateKey):
        raw = key.sign(data, padding.PKCS1v15(), hashes.SHA256())
    else:
        raw = key.sign(data)
    return base64.b64encode(raw).decode()


def layer(key: PrivateKey, digest: str, repository: str = "registry.test/pkg/a") -> SignatureLayer:
    """One signature layer by ``key`` over ``digest``."""
    data = payload(repository, digest)
    return SignatureLayer(data, sign(key, data))
