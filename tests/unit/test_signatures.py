"""The cosign signature check (``fleetwright.signatures``): a signature by a policy key over the
digest verifies; another key, another digest, no signature or malformed bytes are refused, each
saying why; two keys (a rotation) accept either; the ``.sig`` manifest's layers are read as cosign
writes them; bad keys are errors naming their Secret entry."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from fleetwright.signatures import (
    SIGNATURE_ANNOTATION,
    SIGNATURE_LAYER,
    ImageSignatureError,
    InvalidSignatureKeyError,
    NamedKey,
    SignatureLayer,
    blob_matches,
    load_keys,
    signature_layers,
    signature_tag,
    verify,
)
from tests.support.signing import PrivateKey, ecdsa_key, layer, payload, public_pem, sign

pytestmark = pytest.mark.unit

DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
SOURCE = "secret fleetwright-system/image-keys"


def _keys(*private: PrivateKey) -> tuple[NamedKey, ...]:
    return load_keys({f"k{i}.pub": public_pem(k) for i, k in enumerate(private)}, SOURCE)


def test_a_signature_by_the_key_over_the_digest_verifies() -> None:
    key = ecdsa_key()
    assert verify(DIGEST, (layer(key, DIGEST),), _keys(key)) == "k0.pub"


def test_a_signature_by_another_key_is_refused_naming_the_keys() -> None:
    with pytest.raises(
        ImageSignatureError, match=r"no signature verifies under the policy's keys \(k0.pub\)"
    ):
        verify(DIGEST, (layer(ecdsa_key(), DIGEST),), _keys(ecdsa_key()))


def test_a_signature_over_another_digest_is_refused_naming_it() -> None:
    key = ecdsa_key()
    with pytest.raises(ImageSignatureError, match=f"is over {OTHER}, not this digest") as refused:
        verify(DIGEST, (layer(key, OTHER),), _keys(key))
    assert refused.value.reason == "ImageSignatureRefused"


def test_no_signature_is_refused_naming_the_tag() -> None:
    with pytest.raises(ImageSignatureError, match=r"no cosign signature \(sha256-a{64}\.sig has none\)"):
        verify(DIGEST, (), _keys(ecdsa_key()))


@pytest.mark.parametrize(
    "bad",
    [
        SignatureLayer(payload("r", DIGEST), "not base64!"),
        SignatureLayer(payload("r", DIGEST), base64.b64encode(b"\x30\x02garbage").decode()),
        SignatureLayer(b"not json", ""),
    ],
    ids=["signature-not-base64", "signature-not-der", "payload-not-json"],
)
def test_malformed_signatures_verify_nothing(bad: SignatureLayer) -> None:
    with pytest.raises(ImageSignatureError, match="no signature verifies"):
        verify(DIGEST, (bad,), _keys(ecdsa_key()))


def test_a_signed_payload_without_a_digest_is_refused() -> None:
    key = ecdsa_key()
    data = b'{"critical": {"image": {}}}'
    with pytest.raises(ImageSignatureError, match="is over no digest"):
        verify(DIGEST, (SignatureLayer(data, sign(key, data)),), _keys(key))


def test_one_good_layer_among_bad_ones_verifies() -> None:
    key = ecdsa_key()
    layers = (layer(ecdsa_key(), DIGEST), layer(key, OTHER), layer(key, DIGEST))
    assert verify(DIGEST, layers, _keys(key)) == "k0.pub"


def test_two_keys_during_a_rotation_accept_either() -> None:
    old, new = ecdsa_key(), ecdsa_key()
    keys = _keys(old, new)
    assert verify(DIGEST, (layer(old, DIGEST),), keys) == "k0.pub"
    assert verify(DIGEST, (layer(new, DIGEST),), keys) == "k1.pub"


def test_rsa_and_ed25519_keys_verify() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ed_key = ed25519.Ed25519PrivateKey.generate()
    keys = _keys(rsa_key, ed_key)
    assert verify(DIGEST, (layer(rsa_key, DIGEST),), keys) == "k0.pub"
    assert verify(DIGEST, (layer(ed_key, DIGEST),), keys) == "k1.pub"


def test_keys_are_the_pub_entries_in_name_order() -> None:
    a, b = ecdsa_key(), ecdsa_key()
    keys = load_keys({"b.pub": public_pem(b), "cosign.key": "private", "a.pub": public_pem(a)}, SOURCE)
    assert [k.name for k in keys] == ["a.pub", "b.pub"]


def test_a_bad_key_entry_is_an_error_naming_it() -> None:
    with pytest.raises(InvalidSignatureKeyError, match=r"image-keys\[old.pub\]: not a PEM public key"):
        load_keys({"old.pub": "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n"}, SOURCE)


def test_a_secret_without_public_keys_is_an_error_naming_it() -> None:
    with pytest.raises(InvalidSignatureKeyError, match=r"image-keys: no \*\.pub entry"):
        load_keys({"cosign.key": "x"}, SOURCE)


def test_the_signature_manifest_is_read_as_cosign_writes_it() -> None:
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "layers": [
            {
                "mediaType": SIGNATURE_LAYER,
                "digest": "sha256:1",
                "annotations": {SIGNATURE_ANNOTATION: "c2ln"},
            },
            {"mediaType": SIGNATURE_LAYER, "digest": "sha256:2", "annotations": {}},
            {"mediaType": "application/octet-stream", "digest": "sha256:3"},
        ],
    }
    assert signature_layers(manifest) == (("sha256:1", "c2ln"),)
    assert signature_layers({"layers": "nope"}) == ()
    assert signature_tag(DIGEST) == "sha256-" + "a" * 64 + ".sig"
    assert blob_matches(b"", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert not blob_matches(b"x", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
