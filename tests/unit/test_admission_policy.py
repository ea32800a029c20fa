"""The operator's image admission policy: digest pinning and the registry allow-list, in the pure
validator and through the webhook's AdmissionReview answer, each denial naming its field path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from fleetwright.api.validation import AdmissionPolicy, Result, validate_nodeprofile
from fleetwright.webhook.admission import ADMISSION_ENV, AdmissionPolicyError, load_admission_policy, review
from tests.support.manifests import profile_manifest

pytestmark = pytest.mark.unit

DIGEST = "sha256:" + "a" * 64


def pkg(name: str, image: str, digest: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "version": "1.0.0", "image": image}
    if digest:
        out["digest"] = digest
    return out


def errors(result: Result) -> dict[str, str]:
    return {e.path: e.rule for e in result.errors}


class NoLookup:
    def policy_names(self) -> set[str]:
        return set()

    def profiles_referencing(self, policy: str) -> list[str]:
        return []

    def profile_objects(self) -> list[dict[str, Any]]:
        return []


def test_without_a_policy_unpinned_images_from_anywhere_are_admitted() -> None:
    obj = profile_manifest(pkg("a", "quay.io/x/a"))
    assert validate_nodeprofile(obj).ok
    assert validate_nodeprofile(obj, admission=AdmissionPolicy()).ok


def test_an_unpinned_image_is_rejected_when_digests_are_required() -> None:
    policy = AdmissionPolicy(require_digest=True)
    obj = profile_manifest(pkg("pinned", "ghcr.io/acme/a", DIGEST), pkg("floating", "ghcr.io/acme/b"))
    result = validate_nodeprofile(obj, admission=policy)
    assert errors(result) == {"spec.packages[1].digest": "image-digest-required"}
    assert "pinned by digest" in result.errors[0].message
    assert "ghcr.io/acme/b:1.0.0" in result.errors[0].message


@pytest.mark.parametrize(
    ("image", "allowed"),
    [
        ("ghcr.io/acme/tuning", True),
        ("registry.internal:5000/pkgs/kdump", True),
        ("ghcr.io/acmeevil/tuning", False),  # a prefix matches whole path components only
        ("docker.io/acme/tuning", False),
        ("ghcr.io.evil.com/acme/tuning", False),
    ],
)
def test_the_registry_allow_list_matches_whole_components(image: str, allowed: bool) -> None:
    policy = AdmissionPolicy(allowed_registries=("ghcr.io/acme", "registry.internal:5000"))
    result = validate_nodeprofile(profile_manifest(pkg("p", image, DIGEST)), admission=policy)
    if allowed:
        assert result.ok, result.errors
    else:
        assert errors(result) == {"spec.packages[0].image": "image-registry-not-allowed"}
        assert "ghcr.io/acme, registry.internal:5000" in result.errors[0].message


def test_the_webhook_denies_with_the_field_path_in_message_and_causes() -> None:
    policy = AdmissionPolicy(require_digest=True, allowed_registries=("ghcr.io/acme",))
    request = {
        "uid": "u1",
        "kind": {"group": "fleetwright.io", "version": "v1alpha1", "kind": "NodeProfile"},
        "resource": {"group": "fleetwright.io", "version": "v1alpha1", "resource": "nodeprofiles"},
        "operation": "CREATE",
        "name": "p",
        "object": profile_manifest(pkg("a", "docker.io/library/a")),
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    response = review(body, NoLookup(), policy)["response"]
    assert response["allowed"] is False
    fields = {c["field"] for c in response["status"]["details"]["causes"]}
    assert fields == {"spec.packages[0].digest", "spec.packages[0].image"}
    assert (
        "spec.packages[0].image: 'docker.io/library/a' is not from an allowed registry"
        in (response["status"]["message"])
    )
    # The same request without the policy is admitted: the rules are the operator's choice.
    assert review(body, NoLookup())["response"]["allowed"] is True


def test_the_policy_settings_reject_unknown_fields_by_name() -> None:
    with pytest.raises(ValidationError, match="allowed_registry"):
        AdmissionPolicy.model_validate({"allowed_registry": ["ghcr.io"]})


def test_the_webhook_loads_the_charts_policy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "admission.json"
    path.write_text(json.dumps({"require_digest": True, "allowed_registries": ["ghcr.io/acme"]}))
    monkeypatch.setenv(ADMISSION_ENV, str(path))
    assert load_admission_policy() == AdmissionPolicy(
        require_digest=True, allowed_registries=("ghcr.io/acme",)
    )
    monkeypatch.delenv(ADMISSION_ENV)
    assert load_admission_policy() == AdmissionPolicy()


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ('{"require_digest": "sometimes"}', "require_digest"),
        ('{"allowed_registries": "ghcr.io"}', "allowed_registries"),
        ("{not json", "<root>"),
    ],
)
def test_a_bad_policy_file_stops_the_webhook_naming_the_field(
    tmp_path: Path, content: str, named: str
) -> None:
    path = tmp_path / "admission.json"
    path.write_text(content)
    with pytest.raises(AdmissionPolicyError, match=named) as caught:
        load_admission_policy(path)
    assert str(path) in str(caught.value)
