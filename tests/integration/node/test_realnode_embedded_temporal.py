"""The README's ``helm install`` with the chart's own Temporal, on the real node: no Temporal address
given, so the release runs ``temporal server start-dev`` on a claim (bound here to a static hostPath
PersistentVolume: the local cluster has no provisioner) and every process reaches it by its
Service name. ``helm test`` passes; a rollout driven by the in-cluster processes runs its workflows
in that Temporal (the host's dev server never hears of it) and completes with exactly one Job per
stage although the Temporal pod is deleted while the real node's stage runs; ``helm uninstall``
leaves only what docs/install.md says it keeps (the CRDs, the database claim, the package
namespace)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleetwright.images import spec as image_spec
from fleetwright.local import realnode
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from fleetwright.local.temporalserver import LocalTemporal, temporal_cli
from fleetwright.packagetest.hostroot import HostRoot
from tests.support.chartinstall import (
    built,
    chart_values,
    embedded_temporal_values,
    install_args,
    local_volume,
    uninstall_keeping_the_package_namespace,
)
from tests.support.chartrbac import CHART, PACKAGES, helm
from tests.support.engine import kubectl_json, unique
from tests.support.realnode import (
    apply_marked_rollout,
    assert_each_stage_ran_once,
    delete_rollout,
    wait_real_stage_running,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.node, pytest.mark.timeout(1200)]

# Long enough that the Temporal pod is deleted and replaced while the real node's stage runs.
STAGE_SECONDS = 20
SIZE = "1Gi"


@dataclass
class Release:
    release: str
    namespace: str
    home: Path
    volume: str

    @property
    def temporal(self) -> str:
        return f"{self.release}-fleetwright-temporal"


@pytest.fixture(scope="module")
def installed(
    cluster: LocalCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Release]:
    name = unique("fwt")
    release = Release(name, unique("fwt-system"), tmp_path_factory.mktemp("helm"), f"{name}-temporal")
    # The chart creates the package namespace; the earlier tests' rollouts may have.
    cluster.kubectl("delete", "namespace", PACKAGES, "--ignore-not-found", "--timeout=120s", timeout=180)
    local_volume(cluster, real_node, release.volume, SIZE)
    # No Temporal address: the chart runs its own.
    settings = realnode.chart_settings(real_node, None)
    values = [
        *chart_values(built(real_node, image_spec.FLEETWRIGHT).digest, unique("embedded"), settings),
        *embedded_temporal_values(real_node, SIZE),
    ]
    try:
        helm(cluster, release.home, *install_args(release.release, CHART, release.namespace, values))
        yield release
    finally:
        helm(
            cluster, release.home, "uninstall", name, "-n", release.namespace, "--ignore-not-found", "--wait"
        )
        cluster.kubectl("delete", "namespace", release.namespace, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "pv", release.volume, "--ignore-not-found", "--wait=false")


def temporal_pod(cluster: LocalCluster, namespace: str) -> dict[str, Any] | None:
    """The Temporal pod that is Ready and not being deleted, if any."""
    pods = kubectl_json(cluster, "pods", "-n", namespace, "-l", "app.kubernetes.io/component=temporal")
    for pod in pods["items"]:
        conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
        if conditions.get("Ready") == "True" and not pod["metadata"].get("deletionTimestamp"):
            return dict(pod)
    return None


def embedded_workflow(cluster: LocalCluster, release: Release, workflow_id: str) -> dict[str, Any]:
    """The workflow as the embedded Temporal knows it (its own CLI, in its pod)."""
    done = cluster.kubectl(
        "exec", "-n", release.namespace, f"deploy/{release.temporal}", "--",
        "temporal", "workflow", "describe", "--workflow-id", workflow_id, "--output", "json",
    )  # fmt: skip
    return dict(json.loads(done.stdout))


def test_the_charts_own_temporal_serves_a_rollout_that_survives_its_pods_deletion(
    cluster: LocalCluster,
    real_node: RealNode,
    host_root: HostRoot,
    temporal_server: LocalTemporal,
    installed: Release,
) -> None:
    first = temporal_pod(cluster, installed.namespace)
    assert first is not None
    assert first["spec"]["nodeName"] == real_node.options.name
    assert first["spec"]["containers"][0]["image"] == built(real_node, image_spec.TEMPORAL).pinned()
    settings = json.loads(
        kubectl_json(
            cluster, "configmap", "-n", installed.namespace, f"{installed.release}-fleetwright-settings"
        )["data"]["settings.json"]
    )
    assert settings["temporal_address"] == f"{installed.temporal}.{installed.namespace}.svc:7233"
    claim = kubectl_json(cluster, "pvc", "-n", installed.namespace, installed.temporal)
    assert claim["spec"]["volumeName"] == installed.volume

    # helm test: the webhook denies an invalid NodeProfile over its Service; Temporal answers.
    tested = helm(cluster, installed.home, "test", installed.release, "-n", installed.namespace).stdout
    for check in ("webhook", "temporal"):
        assert f"{installed.release}-fleetwright-test-{check}" in tested, tested
    assert tested.count("Phase:          Succeeded") == 2, tested

    rollout = apply_marked_rollout(cluster, real_node, "rnt", "once", STAGE_SECONDS)
    name = rollout.name
    try:
        wait_real_stage_running(cluster, real_node, name)
        cluster.kubectl("delete", "pod", "-n", installed.namespace, first["metadata"]["name"], "--wait=false")
        second = wait_for(
            lambda: (
                (p := temporal_pod(cluster, installed.namespace))
                and p["metadata"]["uid"] != first["metadata"]["uid"]
                and p
            ),
            timeout=300,
            what="a new Temporal pod to be Ready",
            interval=1,
        )
        assert second["spec"]["nodeName"] == real_node.options.name
        # The stage that ran across Temporal's restart ran once.
        assert_each_stage_ran_once(cluster, host_root, rollout)
        # The workflows ran in the embedded Temporal, on the database that outlived the first pod.
        described = embedded_workflow(cluster, installed, f"nodeprofile/{name}")
        assert described["workflowExecutionInfo"]["execution"]["workflowId"] == f"nodeprofile/{name}"
        on_host = temporal_cli(
            "workflow",
            "describe",
            "--workflow-id",
            f"nodeprofile/{name}",
            "--address",
            temporal_server.address,
        )
        assert on_host.returncode != 0, "the host's Temporal ran the release's workflow"
        assert "not found" in on_host.stderr.lower(), on_host.stderr
    finally:
        delete_rollout(cluster, name)


def test_helm_uninstall_keeps_only_the_crds_the_database_claim_and_the_package_namespace(
    cluster: LocalCluster, installed: Release
) -> None:
    uninstall_keeping_the_package_namespace(cluster, installed.home, installed.release, installed.namespace)
    selector = f"app.kubernetes.io/instance={installed.release}"
    assert cluster.kubectl("get", "crd", "nodeprofiles.fleetwright.io", "-o", "name").stdout.strip()

    def left() -> list[str]:
        kinds = "all,configmap,secret,serviceaccount,role,rolebinding,pvc"
        listed = kubectl_json(cluster, kinds, "-n", installed.namespace, "-l", selector)
        return sorted(f"{i['kind']}/{i['metadata']['name']}" for i in listed["items"])

    # The pods stop gracefully after helm returns; what stays is the claim, kept on purpose.
    wait_for(
        lambda: left() == [f"PersistentVolumeClaim/{installed.temporal}"],
        timeout=180,
        what="only the database claim to remain",
        interval=1,
    )
    cluster.kubectl("delete", "pvc", "-n", installed.namespace, installed.temporal)
    cluster.kubectl("delete", "namespace", PACKAGES, "--wait=false")
