"""Admission against the real kube-apiserver: the generated CRDs (schema + CEL) and fleetwright's
validating webhook (HTTPS on loopback, local CA) reject every invalid corpus example with a message
naming the offending field path, accept every valid one, and document the API for kubectl explain."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright import certs
from fleetwright.api import crdgen
from fleetwright.kube.client import from_kubeconfig
from fleetwright.kube.resources import ApiResourceLookup
from fleetwright.local.kubectl import wait_established
from fleetwright.local.stack import wait_for_webhook
from fleetwright.webhook.admission import webhook_configuration
from fleetwright.webhook.review import load_admission_policy
from fleetwright.webhook.server import WebhookServer
from tests.support.corpus import CORPUS, corpus_files, expected_path
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WEBHOOK_CONFIG = "fleetwright-admission-test"


@pytest.fixture(scope="module")
def admission(cluster: ClusterUnderTest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    """CRDs from crds/ plus the webhook, serving from this process; all removed afterwards."""
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    wait_established(cluster.kubectl, [spec.name for spec in crdgen.CRDS])
    bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=["127.0.0.1"])
    paths = certs.write_bundle(bundle, tmp_path_factory.mktemp("webhook-tls"))
    lookup = ApiResourceLookup(from_kubeconfig(cluster.kubeconfig))
    server = WebhookServer(lookup, cert_file=paths["tls.crt"], key_file=paths["tls.key"]).start()
    config = webhook_configuration(ca_bundle=bundle.ca_bundle, url=server.url, name=WEBHOOK_CONFIG)
    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
        wait_for_webhook(cluster.kubectl)
        yield server
    finally:
        # The webhook first: with failurePolicy Fail, a stopped server would block everyone.
        cluster.kubectl(
            "delete", "validatingwebhookconfiguration", WEBHOOK_CONFIG, "--ignore-not-found", check=False
        )
        server.stop()
        cluster.kubectl("delete", "nodeprofiles,deploymentpolicies", "--all", check=False)
        cluster.kubectl("delete", "-f", str(REPO / "crds"), "--ignore-not-found", check=False)


def test_corpus_covers_at_least_40_rules() -> None:
    assert len(corpus_files("invalid")) >= 40


@pytest.mark.parametrize("path", corpus_files("invalid"), ids=lambda p: p.stem)
def test_invalid_example_is_rejected_naming_the_field(
    cluster: ClusterUnderTest, admission: WebhookServer, path: Path
) -> None:
    done = cluster.kubectl("apply", "-f", str(path), check=False)
    assert done.returncode != 0, f"{path.name} was accepted: {done.stdout}"
    assert expected_path(path) in done.stderr, done.stderr
    obj = yaml.safe_load(path.read_text())
    gone = cluster.kubectl("get", obj["kind"].lower(), obj["metadata"]["name"], check=False)
    assert gone.returncode != 0, "a rejected object must not exist"


@pytest.mark.parametrize("path", corpus_files("valid"), ids=lambda p: p.stem)
def test_valid_example_is_accepted(cluster: ClusterUnderTest, admission: WebhookServer, path: Path) -> None:
    done = cluster.kubectl("apply", "-f", str(path), check=False)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    # Profiles before policies: the webhook refuses deleting a policy that is still referenced.
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in sorted(docs, key=lambda d: d["kind"] != "NodeProfile"):
        cluster.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"])


def test_explain_documents_the_api(cluster: ClusterUnderTest, admission: WebhookServer) -> None:
    out = cluster.kubectl("explain", "nodeprofile.spec.packages").stdout
    assert "Semantic version" in out
    assert "configInterrupts" in out
    policy = cluster.kubectl("explain", "deploymentpolicy.spec.maxUnavailable").stdout
    assert "Hard cap on nodes disrupted at once" in policy


def test_deleting_a_referenced_policy_is_refused(cluster: ClusterUnderTest, admission: WebhookServer) -> None:
    manifests = """
apiVersion: fleetwright.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: in-use}
---
apiVersion: fleetwright.io/v1alpha1
kind: NodeProfile
metadata: {name: uses-policy}
spec:
  nodeSelector: {matchLabels: {pool: a}}
  deploymentPolicyRef: {name: in-use}
  packages: [{name: a, version: 1.0.0, image: ghcr.io/example/a}]
"""
    cluster.kubectl("apply", "-f", "-", input=manifests)
    refused = cluster.kubectl("delete", "deploymentpolicy", "in-use", check=False)
    assert refused.returncode != 0
    assert "uses-policy" in refused.stderr
    assert "spec.deploymentPolicyRef.name" in refused.stderr
    assert cluster.kubectl("get", "dp", "in-use", check=False).returncode == 0
    cluster.kubectl("delete", "np", "uses-policy")
    cluster.kubectl("delete", "dp", "in-use")


def test_warnings_reach_the_user(cluster: ClusterUnderTest, admission: WebhookServer) -> None:
    manifest = """
apiVersion: fleetwright.io/v1alpha1
kind: NodeProfile
metadata: {name: forgot-check}
spec:
  nodeSelector: {matchLabels: {pool: a}}
  packages:
  - name: s
    version: 1.0.0
    image: ghcr.io/nvidia/skyhook-packages/shellscript
    configMap: {apply.sh: "echo hi"}
"""
    done = cluster.kubectl("apply", "-f", "-", input=manifest)
    assert "spec.packages[0].configMap[apply.sh]" in done.stderr
    assert "apply_check.sh" in done.stderr
    cluster.kubectl("delete", "np", "forgot-check")


def test_short_names_category_and_printer_columns(
    cluster: ClusterUnderTest, admission: WebhookServer
) -> None:
    cluster.kubectl("apply", "-f", str(CORPUS / "valid" / "nodewright-tuning.yaml"))
    try:
        table = cluster.kubectl("get", "np").stdout.splitlines()
        assert table[0].split() == ["NAME", "READY", "PHASE", "COMPLETE", "IN-PROGRESS", "POLICY", "AGE"]
        everything = cluster.kubectl("get", "fleetwright", "-o", "name").stdout
        assert "nodeprofile.fleetwright.io/valid-nodewright-tuning" in everything
        assert "deploymentpolicy.fleetwright.io/valid-nodewright-default" in everything
        stored = json.loads(cluster.kubectl("get", "dp", "valid-nodewright-default", "-o", "json").stdout)
        assert stored["spec"]["failure"] == {"action": "halt", "maxFailedNodes": 0}  # defaults materialized
    finally:
        cluster.kubectl("delete", "np", "valid-nodewright-tuning")
        cluster.kubectl("delete", "dp", "valid-nodewright-default")


# ----- the operator's image policy (digest pinning, registry allow-list) ---------------------------

POLICY_LABEL = "test.fleetwright.io/admission-policy"


def policy_profile(image: str, digest: str | None) -> str:
    package: dict[str, str] = {"name": "tuning", "version": "1.0.0", "image": image}
    if digest:
        package["digest"] = digest
    return json.dumps(
        {
            "apiVersion": "fleetwright.io/v1alpha1",
            "kind": "NodeProfile",
            # Only the policy webhook below selects this label: the shared cluster is unaffected.
            "metadata": {"name": "image-policy-probe", "labels": {POLICY_LABEL: "true"}},
            "spec": {"nodeSelector": {"matchLabels": {"pool": "gpu"}}, "packages": [package]},
        }
    )


def test_the_image_policy_rejects_unpinned_and_foreign_images(
    cluster: ClusterUnderTest, admission: WebhookServer, tmp_path: Path
) -> None:
    # The policy as the chart renders it (values `admission` -> FLEETWRIGHT_ADMISSION_FILE file).
    rules = tmp_path / "admission.json"
    rules.write_text(json.dumps({"require_digest": True, "allowed_registries": ["ghcr.io/acme"]}))
    bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=["127.0.0.1"])
    paths = certs.write_bundle(bundle, tmp_path / "tls")
    server = WebhookServer(
        ApiResourceLookup(from_kubeconfig(cluster.kubeconfig)),
        cert_file=paths["tls.crt"],
        key_file=paths["tls.key"],
        admission=load_admission_policy(rules),
    ).start()
    name = "fleetwright-image-policy-test"
    config = webhook_configuration(ca_bundle=bundle.ca_bundle, url=server.url, name=name)
    config["webhooks"][0]["objectSelector"] = {"matchLabels": {POLICY_LABEL: "true"}}
    digest = "sha256:" + "c" * 64

    def dry_run(image: str, pinned: str | None) -> Any:
        return cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=policy_profile(image, pinned), check=False
        )

    try:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
        unpinned = wait_for(
            lambda: (refused := dry_run("ghcr.io/acme/tuning", None)).returncode != 0 and refused,
            60,
            "the image policy webhook to take effect",
            interval=0.5,
        )
        assert "spec.packages[0].digest" in unpinned.stderr, unpinned.stderr
        assert "pinned by digest" in unpinned.stderr
        foreign = dry_run("docker.io/attacker/tuning", digest)
        assert foreign.returncode != 0
        assert "spec.packages[0].image" in foreign.stderr, foreign.stderr
        assert "not from an allowed registry" in foreign.stderr
        allowed = dry_run("ghcr.io/acme/tuning", digest)
        assert allowed.returncode == 0, allowed.stderr
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found", check=False)
        server.stop()


def test_a_failure_rule_its_failures_can_outlast_is_warned_at_apply(
    cluster: ClusterUnderTest, admission: WebhookServer
) -> None:
    # Issue 37's policy: two tolerated failures, left cordoned, fill a budget of two.
    manifest = """
apiVersion: fleetwright.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: tolerant-rollback}
spec:
  maxUnavailable: 2
  steps: [{name: rest, batches: {strategy: fixed, initial: 2}}]
  failure: {maxFailedNodes: 2, action: rollback}
"""
    done = cluster.kubectl("apply", "-f", "-", input=manifest)
    assert "spec.failure.maxFailedNodes: 2 >= spec.maxUnavailable (2)" in done.stderr, done.stderr
    assert "then rollback fires as no node can start" in done.stderr, done.stderr
    cluster.kubectl("delete", "dp", "tolerant-rollback")
