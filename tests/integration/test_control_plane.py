"""Proof that the local control plane is the real thing: a real apiserver version, kwok nodes,
Jobs run by the real Job controller, PodDisruptionBudgets enforced by the Eviction API, RBAC."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from fleetwright.api.keys import STAGE_LABEL, cordon_key
from fleetwright.errors import ForbiddenError
from fleetwright.kube import client as kube_client
from fleetwright.kube import nodes as kube_nodes
from fleetwright.kube.eviction import EvictionResult, evict
from fleetwright.local import nodes as fleet_nodes
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.stagejob.render import PREFLIGHT_ENV
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


BUILT_KUBE_VERSION = "v1.36.3"


def get_json(cluster: ClusterUnderTest, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def fleet(cluster: ClusterUnderTest) -> list[str]:
    return cluster.add_nodes(50)


@pytest.fixture
def namespace(cluster: ClusterUnderTest, request: pytest.FixtureRequest) -> Any:
    name = f"t-{request.node.name.replace('_', '-')[:40].lower()}".rstrip("-")
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        60.0,
        "default service account",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_apiserver_reports_the_built_release(cluster: ClusterUnderTest) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"] == BUILT_KUBE_VERSION
    assert version["major"] == "1"
    assert version["minor"] == "36"


def test_fifty_kwok_nodes_become_ready_with_their_labels(cluster: ClusterUnderTest, fleet: list[str]) -> None:
    assert len(fleet) == 50
    items = {n["metadata"]["name"]: n for n in get_json(cluster, "nodes")["items"]}
    for name in fleet:
        node = items[name]
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert [c["status"] for c in ready] == ["True"], name
        labels = node["metadata"]["labels"]
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.product"] in fleet_nodes.GPU_PRODUCTS
        assert labels["topology.kubernetes.io/zone"] in fleet_nodes.ZONES
        assert labels[fleet_nodes.RACK_LABEL].startswith("rack-")
        assert node["status"]["nodeInfo"]["bootID"] == fleet_nodes.boot_id(name)
    zones = {items[n]["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in fleet}
    assert zones == set(fleet_nodes.ZONES)


def job_manifest(
    name: str,
    node: str,
    *,
    outcome: str | None = None,
    seconds: float = 0.5,
    stage: str | None = None,
    stages: dict[str, float] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"app": name}
    if outcome:
        labels["sim.fleetwright.io/outcome"] = outcome
    if stage:
        labels[STAGE_LABEL] = stage
    container: dict[str, Any] = {"name": "stage", "image": "registry.example/fleetwright/agent:0.1.0"}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": stage_pod_timing(seconds, stages=stages),
                },
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "tolerations": [
                        {
                            "key": "node.kubernetes.io/unschedulable",
                            "operator": "Exists",
                            "effect": "NoSchedule",
                        }
                    ],
                    "containers": [container],
                },
            },
        },
    }


def job_condition(cluster: ClusterUnderTest, namespace: str, name: str) -> str | None:
    job = get_json(cluster, "job", name, "-n", namespace)
    for condition in job["status"].get("conditions") or []:
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return None


def test_job_pinned_to_a_cordoned_node_completes(
    cluster: ClusterUnderTest, fleet: list[str], namespace: str
) -> None:
    node = fleet[0]
    cluster.kubectl("cordon", node)
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job_manifest("ok", node)))
        assert wait_for(lambda: job_condition(cluster, namespace, "ok"), 60.0, "job to finish") == "Complete"
        pods = get_json(cluster, "pods", "-n", namespace, "-l", "app=ok")["items"]
        assert [p["spec"]["nodeName"] for p in pods] == [node]
        assert pods[0]["status"]["phase"] == "Succeeded"
    finally:
        cluster.kubectl("uncordon", node)


def test_a_stage_pod_runs_for_its_simulated_duration(
    cluster: ClusterUnderTest, fleet: list[str], namespace: str
) -> None:
    """Benchmarks rest on this: a stage pod completes after the time it is given, not at once (a
    jitter bound below the delay used to replace it, and every stage finished immediately)."""
    slow_validation = {"validate": 4.0}
    manifests = [
        job_manifest("timed", fleet[2], seconds=4.0),
        # A stage of its own time: the validation's pod runs 4 s, the apply stage's does not.
        job_manifest("timed-validate", fleet[2], stage="validate", stages=slow_validation),
        job_manifest("timed-apply", fleet[2], stage="apply", stages=slow_validation),
        job_manifest("timed-preflight", fleet[2], stage="apply", stages={"preflight": 4}, env=PREFLIGHT_ENV),
    ]
    items = {"apiVersion": "v1", "kind": "List", "items": manifests}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(items))
    ran = {m["metadata"]["name"]: run_time(cluster, namespace, m["metadata"]["name"]) for m in manifests}
    # Whole seconds on both ends; the pod is created and started within the Job's first second.
    slow = {name: took for name, took in ran.items() if name != "timed-apply"}
    assert all(timedelta(seconds=3) <= took <= timedelta(seconds=15) for took in slow.values()), ran
    assert ran["timed-apply"] <= timedelta(seconds=2), ran


def run_time(cluster: ClusterUnderTest, namespace: str, name: str) -> timedelta:
    """How long the Job ``name`` ran, once it completed."""
    assert wait_for(lambda: job_condition(cluster, namespace, name), 60.0, f"{name} to finish") == "Complete"
    status = get_json(cluster, "job", name, "-n", namespace)["status"]
    started, completed = (datetime.fromisoformat(status[k]) for k in ("startTime", "completionTime"))
    return completed - started


def test_job_marked_to_fail_fails(cluster: ClusterUnderTest, fleet: list[str], namespace: str) -> None:
    manifest = job_manifest("broken", fleet[1], outcome="fail")
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    assert wait_for(lambda: job_condition(cluster, namespace, "broken"), 60.0, "job to finish") == "Failed"
    pod = get_json(cluster, "pods", "-n", namespace, "-l", "app=broken")["items"][0]
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_image_that_never_pulls_stays_pending_with_a_reason(
    cluster: ClusterUnderTest, fleet: list[str], namespace: str
) -> None:
    manifest = job_manifest("nopull", fleet[2], outcome="image-pull-backoff")
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))

    def waiting_reason() -> str | None:
        pods = get_json(cluster, "pods", "-n", namespace, "-l", "app=nopull")["items"]
        statuses = pods[0]["status"].get("containerStatuses") if pods else None
        return statuses[0]["state"].get("waiting", {}).get("reason") if statuses else None

    assert wait_for(waiting_reason, 60.0, "ImagePullBackOff") == "ImagePullBackOff"
    time.sleep(2)
    assert job_condition(cluster, namespace, "nopull") is None


def workload_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "trainer"}},
        "spec": {"nodeName": node, "containers": [{"name": "train", "image": "registry.example/trainer:1"}]},
    }


def pdb_manifest(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer"},
        "spec": {"selector": {"matchLabels": {"app": "trainer"}}, **spec},
    }


def test_pdb_refusal_is_a_429_and_a_relaxed_pdb_lets_the_pod_go(
    cluster: ClusterUnderTest, fleet: list[str], namespace: str
) -> None:
    assert isinstance(cluster, LocalCluster)
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(workload_pod("trainer-0", fleet[3]))
    )
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pdb_manifest(minAvailable=1)))

    def pdb_observed() -> bool:
        status = get_json(cluster, "pdb", "trainer", "-n", namespace).get("status", {})
        return bool(status.get("currentHealthy") == 1 and status.get("observedGeneration"))

    wait_for(pdb_observed, 60.0, "the disruption controller to observe the PDB")
    api = kube_client.from_kubeconfig(cluster.kubeconfig)
    blocked = evict(api, namespace, "trainer-0")
    assert blocked.result is EvictionResult.BLOCKED_BY_PDB
    assert "trainer" in blocked.message
    assert "disruption budget" in blocked.message

    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pdb_manifest(minAvailable=0)))
    wait_for(
        lambda: get_json(cluster, "pdb", "trainer", "-n", namespace)["status"].get("disruptionsAllowed") == 1,
        60.0,
        "the relaxed PDB to allow a disruption",
    )
    assert evict(api, namespace, "trainer-0").result is EvictionResult.ACCEPTED
    wait_for(
        lambda: not get_json(cluster, "pods", "-n", namespace, "-l", "app=trainer")["items"],
        60.0,
        "the evicted pod to be gone",
    )
    assert evict(api, namespace, "trainer-0").result is EvictionResult.GONE


def test_cordon_and_uncordon_through_the_adapter_respect_foreign_cordons(
    cluster: ClusterUnderTest, fleet: list[str]
) -> None:
    api = kube_client.from_kubeconfig(cluster.kubeconfig)
    ours, foreign = fleet[4], fleet[5]

    result = kube_nodes.cordon(api, ours, "profile-a")
    assert result.ours
    assert not result.foreign
    assert get_json(cluster, "node", ours)["spec"]["unschedulable"] is True
    assert kube_nodes.cordon(api, ours, "profile-a").ours  # idempotent
    assert kube_nodes.uncordon(api, ours, "profile-a") is True
    node = get_json(cluster, "node", ours)
    assert not node["spec"].get("unschedulable")
    assert cordon_key("profile-a") not in node["metadata"].get("annotations", {})

    cluster.kubectl("cordon", foreign)
    try:
        assert kube_nodes.cordon(api, foreign, "profile-a").foreign
        assert kube_nodes.uncordon(api, foreign, "profile-a") is False
        assert get_json(cluster, "node", foreign)["spec"]["unschedulable"] is True
    finally:
        cluster.kubectl("uncordon", foreign)


def test_a_token_without_permission_gets_403(cluster: ClusterUnderTest, namespace: str) -> None:
    assert isinstance(cluster, LocalCluster)
    cluster.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    token = cluster.kubectl("create", "token", "nobody", "-n", namespace).stdout.strip()
    api = kube_client.from_token(cluster.server, token, ca_cert=cluster.ca_cert)
    with pytest.raises(ForbiddenError, match="forbidden"):
        kube_nodes.get_node(api, "gpu-node-0000")


def test_a_reboot_changes_the_boot_id(cluster: ClusterUnderTest, fleet: list[str]) -> None:
    node = fleet[6]
    new_boot = fleet_nodes.boot_id(node, generation=1)
    cluster.kubectl("annotate", "node", node, f"{fleet_nodes.REBOOT_ANNOTATION}={new_boot}")
    wait_for(
        lambda: get_json(cluster, "node", node)["status"]["nodeInfo"]["bootID"] == new_boot,
        60.0,
        "the new boot id",
    )
    annotations = get_json(cluster, "node", node)["metadata"]["annotations"]
    assert fleet_nodes.REBOOT_ANNOTATION not in annotations


def test_an_apiserver_killed_and_restarted_keeps_the_cluster_state(
    cluster: ClusterUnderTest, fleet: list[str]
) -> None:
    """The chaos suite's building block: SIGKILL one component, start it again on the same port."""
    assert isinstance(cluster, LocalCluster)
    before = cluster.pids["kube-apiserver"]
    cluster.restart_component("kube-apiserver")
    assert cluster.pids["kube-apiserver"] != before
    names = {n["metadata"]["name"] for n in get_json(cluster, "nodes")["items"]}
    assert set(fleet) <= names
