"""``helm install`` and ``helm upgrade`` of the chart against the real kube-apiserver: the release
installs, the self-managed webhook CA is created once and kept across upgrades (so the caBundle
never flaps), and ``helm uninstall`` leaves no cluster-scoped object behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.chartrbac import CHART, helm
from tests.support.engine import unique
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration

# The package namespace already exists in this shared cluster (other tests' Jobs); a webhook whose
# pods never run (no scheduler here) must not block the cluster's CR writes.
SHARED = ["--set", "packageNamespace.create=false", "--set", "webhook.failurePolicy=Ignore"]


def ca_bundles(cluster: ClusterUnderTest, release: str, namespace: str) -> tuple[str, str]:
    """(the CA in the webhook's Secret, the caBundle the apiserver trusts)."""
    full = f"{release}-fleetwright"
    secret = json.loads(
        cluster.kubectl("get", "secret", f"{full}-webhook-tls", "-n", namespace, "-o", "json").stdout
    )
    config = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration", full, "-o", "json").stdout)
    return secret["data"]["ca.crt"], config["webhooks"][0]["clientConfig"]["caBundle"]


def test_install_upgrade_keeps_the_webhook_ca_and_uninstall_cleans_up(
    cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    release, namespace = unique("fwh"), unique("fwh-system")
    selector = f"app.kubernetes.io/instance={release}"
    installed = False
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleetwright-system"}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(ns))
    try:
        done = helm(
            cluster, tmp_path, "install", release, str(CHART), "-n", namespace, "--create-namespace", *SHARED
        )
        installed = True
        assert "nodeprofiles.fleetwright.io" in done.stdout  # NOTES.txt
        first, trusted = ca_bundles(cluster, release, namespace)
        assert first == trusted
        helm(
            cluster,
            tmp_path,
            "upgrade",
            release,
            str(CHART),
            "-n",
            namespace,
            "--reuse-values",
            "--set",
            "worker.replicas=3",
        )
        again, trusted_again = ca_bundles(cluster, release, namespace)
        assert again == first, "an upgrade regenerated the webhook CA"
        assert trusted_again == first
        replicas = cluster.kubectl(
            "get",
            "deploy",
            f"{release}-fleetwright-worker",
            "-n",
            namespace,
            "-o",
            "jsonpath={.spec.replicas}",
        ).stdout
        assert replicas == "3"
        helm(cluster, tmp_path, "uninstall", release, "-n", namespace)
        installed = False
        left = cluster.kubectl(
            "get",
            "clusterrole,clusterrolebinding,validatingwebhookconfiguration,validatingadmissionpolicy",
            "-l",
            selector,
            "-o",
            "name",
        ).stdout
        assert left.strip() == ""
    finally:
        if installed:
            helm(cluster, tmp_path, "uninstall", release, "-n", namespace)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)


def test_an_upgrade_never_moves_running_rollouts_to_the_charts_own_temporal(
    cluster: ClusterUnderTest, tmp_path: Path
) -> None:
    """A release on your Temporal (as every 0.1.0 release is) upgraded without an address is
    refused, naming the value, before anything changes; with the address kept it upgrades."""
    release, namespace = unique("fwt"), unique("fwt-system")
    yours = ["--set", "settings.temporal_address=temporal.example:7233"]
    helm(
        cluster,
        tmp_path,
        "install",
        release,
        str(CHART),
        "-n",
        namespace,
        "--create-namespace",
        *SHARED,
        *yours,
    )
    try:
        refused = helm(
            cluster,
            tmp_path,
            "upgrade",
            release,
            str(CHART),
            "-n",
            namespace,
            "--reuse-values",
            "--set",
            "settings.temporal_address=",
            refused=True,
        )
        assert "settings.temporal_address" in refused.stderr
        assert "temporal-frontend.temporal.svc:7233" in refused.stderr
        embedded = cluster.kubectl(
            "get",
            "deploy",
            f"{release}-fleetwright-temporal",
            "-n",
            namespace,
            "--ignore-not-found",
            "-o",
            "name",
        )
        assert embedded.stdout.strip() == "", "a refused upgrade created the chart's Temporal"
        helm(cluster, tmp_path, "upgrade", release, str(CHART), "-n", namespace, "--reuse-values")
    finally:
        helm(cluster, tmp_path, "uninstall", release, "-n", namespace)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
