"""The operator's image admission policy: digest pinning and the registry allow-list, in the pure
validator and through the webhook's AdmissionReview answer, each denial naming its field path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from fleetwright.api.validation import AdmissionPolicy, Result, validate_nodeprofile
from fleetwright.webhook.review import ADMISSION_ENV, AdmissionPolicyError, load_admission_policy, review
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

    def policy_registries(self) -> dict[str, list[str]]:
        return {}


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


class PolicyLookup(NoLookup):
    """Policy ``strict`` allows ``ghcr.io/acme``; ``profiles`` are the cluster's NodeProfiles."""

    def __init__(self, profiles: list[dict[str, Any]] | None = None) -> None:
        self.profiles = profiles or []

    def policy_names(self) -> set[str]:
        return {"strict", "open"}

    def profile_objects(self) -> list[dict[str, Any]]:
        return self.profiles

    def policy_registries(self) -> dict[str, list[str]]:
        return {"strict": ["ghcr.io/acme"]}


def _request(resource: str, obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    request = {
        "uid": "u",
        "resource": {"resource": resource},
        "operation": operation,
        "name": "x",
        "object": obj,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
def test_a_profile_image_outside_its_policys_allowed_registries_is_denied(operation: str) -> None:
    obj = profile_manifest(
        pkg("in", "ghcr.io/acme/a"), pkg("out", "docker.io/acme/b"), deploymentPolicyRef={"name": "strict"}
    )
    response = review(_request("nodeprofiles", obj, operation), PolicyLookup())["response"]
    assert response["allowed"] is False
    assert [c["field"] for c in response["status"]["details"]["causes"]] == ["spec.packages[1].image"]
    assert (
        "'docker.io/acme/b' is not from a registry DeploymentPolicy 'strict' allows "
        "(its spec.allowedRegistries: ghcr.io/acme)"
    ) in response["status"]["message"]
    other = profile_manifest(pkg("out", "docker.io/acme/b"), deploymentPolicyRef={"name": "open"})
    assert review(_request("nodeprofiles", other, operation), PolicyLookup())["response"]["allowed"] is True


def test_a_policy_whose_allowed_registries_exclude_a_profiles_image_is_denied() -> None:
    using = profile_manifest(pkg("t", "ghcr.io/acme/t"), deploymentPolicyRef={"name": "strict"})
    using["metadata"]["name"] = "uses-it"
    elsewhere = profile_manifest(pkg("t", "quay.io/x/t"), deploymentPolicyRef={"name": "open"})
    lookup = PolicyLookup([using, elsewhere])
    policy = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "strict"},
        "spec": {"allowedRegistries": ["quay.io/x"]},
    }
    response = review(_request("deploymentpolicies", policy, "UPDATE"), lookup)["response"]
    assert response["allowed"] is False
    assert [c["field"] for c in response["status"]["details"]["causes"]] == ["spec.allowedRegistries"]
    assert (
        "excludes 'ghcr.io/acme/t' (spec.packages[0].image of NodeProfile 'uses-it'; allowed: quay.io/x)"
        in response["status"]["message"]
    )
    policy["spec"] = {"allowedRegistries": ["ghcr.io/acme"]}
    assert review(_request("deploymentpolicies", policy, "UPDATE"), lookup)["response"]["allowed"] is True
