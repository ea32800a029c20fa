"""The admission webhook's AdmissionReview handling, its HTTPS server on loopback with the local
CA, and the certificates it serves."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from fleetwright import certs
from fleetwright.api.common import API_VERSION
from fleetwright.api.keys import WEBHOOK_NAME
from fleetwright.webhook.admission import webhook_configuration
from fleetwright.webhook.review import review
from fleetwright.webhook.server import WebhookServer
from tests.support.manifests import package_manifest, profile_manifest

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class FakeLookup:
    """Cluster facts as plain data (the real one lists CRs through the adapter)."""

    def __init__(
        self,
        policies: set[str],
        references: dict[str, list[str]] | None = None,
        profiles: list[dict[str, Any]] | None = None,
        registries: dict[str, list[str]] | None = None,
    ) -> None:
        self.policies = policies
        self.references = references or {}
        self.profiles = profiles or []
        self.registries = registries or {}
        self.policy_calls = 0

    def policy_names(self) -> set[str]:
        self.policy_calls += 1
        return self.policies

    def profiles_referencing(self, policy: str) -> list[str]:
        return self.references.get(policy, [])

    def profile_objects(self) -> list[dict[str, Any]]:
        return self.profiles

    def policy_registries(self) -> dict[str, list[str]]:
        return self.registries


class BrokenLookup:
    def policy_names(self) -> set[str]:
        raise ConnectionError("apiserver unreachable")

    def profiles_referencing(self, policy: str) -> list[str]:
        raise ConnectionError("apiserver unreachable")

    def profile_objects(self) -> list[dict[str, Any]]:
        raise ConnectionError("apiserver unreachable")

    def policy_registries(self) -> dict[str, list[str]]:
        raise ConnectionError("apiserver unreachable")


def profile(ref: str | None = "careful", version: str = "1.0.0", priority: int = 200) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": {"matchLabels": {"pool": "a"}}, "priority": priority}
    if ref:
        spec["deploymentPolicyRef"] = {"name": ref}
    return profile_manifest(package_manifest("a", version), **spec)


def admission(
    operation: str, resource: str, obj: Any = None, old: Any = None, name: str = "p"
) -> dict[str, Any]:
    kind = {"nodeprofiles": "NodeProfile", "campaigns": "Campaign"}.get(resource, "DeploymentPolicy")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-1",
            "kind": {"group": "fleetwright.io", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "fleetwright.io", "version": "v1alpha1", "resource": resource},
            "name": name,
            "operation": operation,
            "object": obj,
            "oldObject": old,
        },
    }


def test_a_valid_create_is_allowed() -> None:
    answer = review(admission("CREATE", "nodeprofiles", profile()), FakeLookup({"careful"}))
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["response"] == {"uid": "uid-1", "allowed": True}


def test_a_denial_names_every_field_path() -> None:
    answer = review(
        admission("CREATE", "nodeprofiles", profile(ref="nope", version="1.2")), FakeLookup(set())
    )
    response = answer["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('NodeProfile "p" is invalid: ')
    assert "spec.packages[0].version" in status["message"]
    assert "spec.deploymentPolicyRef.name" in status["message"]
    assert {c["field"] for c in status["details"]["causes"]} == {
        "spec.packages[0].version",
        "spec.deploymentPolicyRef.name",
    }


def test_warnings_are_returned_with_an_allowed_answer() -> None:
    obj = profile(ref=None)
    obj["spec"]["packages"][0]["configMap"] = {"config.sh": "x"}
    response = review(admission("CREATE", "nodeprofiles", obj), FakeLookup(set()))["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        "spec.packages[0].configMap[config.sh]: config.sh has no config_check.sh: a shellscript-style "
        "package would pass its check without checking"
    ]


def campaign(policy: str | None, version: str = "1.0.0", image: str = "ghcr.io/acme/a") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "profile": {"allNodes": True, "packages": [{"name": "a", "version": version, "image": image}]},
        "clusters": [{"name": "east", "kubeconfigSecret": "east-kubeconfig"}],
        "stages": [{"name": "all", "clusters": ["east"]}],
    }
    if policy is not None:
        spec["policy"] = {"name": policy}
    return {"apiVersion": API_VERSION, "kind": "Campaign", "metadata": {"name": "c"}, "spec": spec}


def test_a_campaigns_profile_gets_a_nodeprofiles_checks_under_its_path() -> None:
    lookup = FakeLookup(set(), registries={"careful": ["registry.acme.io"]})
    response = review(admission("CREATE", "campaigns", campaign("careful", version="1.2")), lookup)[
        "response"
    ]
    assert response["allowed"] is False
    assert {c["field"] for c in response["status"]["details"]["causes"]} == {
        "spec.profile.packages[0].version",  # not semver
        "spec.policy.name",  # no such DeploymentPolicy
        "spec.profile.packages[0].image",  # not from the policy's allowedRegistries
    }
    assert review(admission("CREATE", "campaigns", campaign(None)), FakeLookup(set()))["response"]["allowed"]
    # An update keeping the same policy does not look it up again (it may have vanished since).
    kept = FakeLookup(set())
    update = admission("UPDATE", "campaigns", campaign("careful"), old=campaign("careful"))
    assert review(update, kept)["response"]["allowed"]
    assert kept.policy_calls == 0


def test_deleting_a_referenced_policy_is_refused() -> None:
    lookup = FakeLookup({"careful"}, {"careful": ["gpu", "cpu"]})
    response = review(
        admission("DELETE", "deploymentpolicies", None, {"metadata": {"name": "careful"}}, "careful"), lookup
    )["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert "cpu, gpu" in response["status"]["message"]
    free = review(admission("DELETE", "deploymentpolicies", name="unused"), lookup)["response"]
    assert free["allowed"] is True


def test_an_update_keeping_a_vanished_reference_is_not_wedged() -> None:
    """The reference is checked only when set or changed: an unrelated edit of a profile whose
    policy vanished (e.g. deleted while the webhook was down) still goes through."""
    lookup = FakeLookup(set())
    old, new = profile(ref="gone"), profile(ref="gone", priority=100)
    assert review(admission("UPDATE", "nodeprofiles", new, old), lookup)["response"]["allowed"] is True
    assert lookup.policy_calls == 0
    changed = review(admission("UPDATE", "nodeprofiles", profile(ref="other"), old), lookup)["response"]
    assert changed["allowed"] is False


def test_objects_being_deleted_are_not_validated() -> None:
    obj = profile(version="bad")
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert (
        review(admission("UPDATE", "nodeprofiles", obj, obj), FakeLookup(set()))["response"]["allowed"]
        is True
    )


def test_a_failed_lookup_denies_with_the_reason() -> None:
    response = review(admission("CREATE", "nodeprofiles", profile()), BrokenLookup())["response"]
    assert response["allowed"] is False
    assert "apiserver unreachable" in response["status"]["message"]


@pytest.mark.parametrize("body", [None, [], {}, {"request": "x"}, {"request": {"uid": 5}}])
def test_malformed_reviews_get_an_answer(body: Any) -> None:
    response = review(body, FakeLookup(set()))["response"]
    assert isinstance(response["allowed"], bool)


def test_configuration_targets_both_kinds_and_policy_deletion() -> None:
    config = webhook_configuration(ca_bundle="Q0E=", url="https://127.0.0.1:9443/validate")
    hook = config["webhooks"][0]
    assert hook["name"] == WEBHOOK_NAME
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["clientConfig"] == {"caBundle": "Q0E=", "url": "https://127.0.0.1:9443/validate"}
    ops = {(op, res) for rule in hook["rules"] for op in rule["operations"] for res in rule["resources"]}
    assert ("DELETE", "deploymentpolicies") in ops
    assert ("DELETE", "nodeprofiles") not in ops
    assert ("UPDATE", "nodeprofiles") in ops
    assert ("CREATE", "campaigns") in ops
    in_cluster = webhook_configuration(ca_bundle="Q0E=", service=("fleetwright", "fleetwright-webhook", 443))
    assert in_cluster["webhooks"][0]["clientConfig"]["service"]["path"] == "/validate"
    with pytest.raises(ValueError, match="exactly one"):
        webhook_configuration(ca_bundle="x")


# ---------------------------------------------------------------------------------------------
# Certificates and the HTTPS server


def test_serving_certificate_is_signed_by_the_ca_for_its_names() -> None:
    bundle = certs.generate_webhook_tls(
        now=NOW,
        dns_names=certs.service_dns_names("fleetwright-webhook", "fleetwright"),
        ip_addresses=["127.0.0.1"],
    )
    ca = x509.load_pem_x509_certificate(bundle.ca.cert_pem)
    leaf = x509.load_pem_x509_certificate(bundle.serving.cert_pem)
    leaf.verify_directly_issued_by(ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "fleetwright-webhook.fleetwright.svc" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not certs.expires_within(bundle.serving.cert_pem, now=NOW, margin=dt.timedelta(days=30))
    assert certs.expires_within(
        bundle.serving.cert_pem, now=NOW + dt.timedelta(days=340), margin=dt.timedelta(days=30)
    )


def test_a_certificate_needs_a_name() -> None:
    with pytest.raises(ValueError, match="at least one"):
        certs.generate_webhook_tls(now=NOW)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[WebhookServer, ssl.SSLContext]]:
    bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=["127.0.0.1"])
    paths = certs.write_bundle(bundle, tmp_path)
    assert paths["tls.key"].stat().st_mode & 0o077 == 0
    lookup = FakeLookup({"careful"}, {"careful": ["p"]})
    with WebhookServer(lookup, cert_file=paths["tls.crt"], key_file=paths["tls.key"]) as running:
        yield running, ssl.create_default_context(cafile=str(paths["ca.crt"]))


def post(url: str, body: bytes, context: ssl.SSLContext) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_https_round_trip_verified_by_the_ca(server: tuple[WebhookServer, ssl.SSLContext]) -> None:
    running, context = server
    assert running.url.startswith("https://127.0.0.1:")
    body = json.dumps(admission("DELETE", "deploymentpolicies", name="careful")).encode()
    status, payload = post(running.url, body, context)
    assert status == 200
    answer = json.loads(payload)
    assert answer["response"]["allowed"] is False
    assert answer["response"]["uid"] == "uid-1"


def test_https_rejects_junk_and_unknown_paths(server: tuple[WebhookServer, ssl.SSLContext]) -> None:
    running, context = server
    assert post(running.url, b"not json", context)[0] == 400
    assert post(running.url.replace("/validate", "/other"), b"{}", context)[0] == 404
    with urllib.request.urlopen(
        running.url.replace("/validate", "/healthz"), context=context, timeout=10
    ) as reply:
        assert reply.read() == b"ok"


def test_clients_that_do_not_trust_the_ca_are_refused(server: tuple[WebhookServer, ssl.SSLContext]) -> None:
    running, _ = server
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(running.url, data=b"{}", context=ssl.create_default_context(), timeout=10)


def test_a_hostile_health_condition_is_denied_naming_the_field_and_the_rule() -> None:
    check = {"name": "xid", "query": "up", "successCondition": "len([0]*100000000) > 0"}
    policy = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": {"healthChecks": [check], "nodeGate": {"checks": ["xid"]}},
    }
    response = review(admission("CREATE", "deploymentpolicies", policy), FakeLookup(set()))["response"]
    assert response["allowed"] is False
    [cause] = response["status"]["details"]["causes"]
    assert cause["field"] == "spec.healthChecks[0].successCondition"
    assert "repeating a sequence" in cause["message"]
