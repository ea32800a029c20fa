"""The drain activity against the real control plane: the real Eviction API, disruption and DaemonSet
controllers; what it evicts and skips, and what holds it, visibly. Each test uses its own nodes,
namespace and profile name, and calls the activities the way a worker would, through
``ActivityEnvironment``."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import (
    DrainRequest,
)
from fleetwright.api.nodeprofile import DrainSpec
from tests.support.nodeactivities import apply, condition, get_json, node_events, pod, running
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import until, wait_for

pytestmark = pytest.mark.integration


def drain_request(
    profile: str, node: str, package_namespace: str = "fleetwright-system", **spec: Any
) -> DrainRequest:
    return DrainRequest(
        profile=profile,
        node=node,
        drain=DrainSpec.model_validate({"timeoutSeconds": 60, **spec}),
        package_namespace=package_namespace,
        poll_seconds=0.5,
    )


async def test_drain_evicts_a_workload_and_returns_only_once_it_is_gone(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    # A finalizer keeps the evicted pod around after the eviction was accepted.
    apply(cluster, namespace, pod("worker", node, finalizers=["fleetwright.io/test-hold"]))
    wait_for(lambda: running(cluster, namespace, "worker"), what="the workload to run")
    env = ActivityEnvironment()
    task = asyncio.create_task(env.run(activities.drain, drain_request("act-drain", node, force=True)))

    def terminating() -> bool:
        return bool(get_json(cluster, "pod", "worker", "-n", namespace)["metadata"].get("deletionTimestamp"))

    await until(terminating, 30.0, "the eviction to be accepted")
    await asyncio.sleep(1.5)
    assert not task.done(), "an accepted eviction is not a drained node"
    cluster.kubectl(
        "patch",
        "pod",
        "worker",
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    report = await asyncio.wait_for(task, 30)
    assert report.evicted == (f"{namespace}/worker",)
    assert cluster.kubectl("get", "pod", "worker", "-n", namespace, check=False).returncode != 0


async def test_drain_leaves_daemonset_and_our_own_package_pods(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    cluster.kubectl("label", "node", node, f"fleetwright-test/ds={namespace}")
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "nodeSelector": {"fleetwright-test/ds": namespace},
                    "containers": [{"name": "agent", "image": "registry.example/agent:1"}],
                },
            },
        },
    }
    apply(cluster, namespace, daemonset)
    ds_pod = wait_for(
        lambda: get_json(cluster, "pods", "-n", namespace, "-l", "app=agent")["items"],
        what="the DaemonSet pod",
    )[0]["metadata"]["name"]
    # No scheduler runs here: bind the DaemonSet's pod to its node as the scheduler would.
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": ds_pod},
        "target": {"kind": "Node", "name": node},
    }
    cluster.kubectl(
        "create",
        "--raw",
        f"/api/v1/namespaces/{namespace}/pods/{ds_pod}/binding",
        "-f",
        "-",
        input=json.dumps(binding),
    )
    ours = {"app.kubernetes.io/managed-by": "fleetwright"}
    apply(cluster, namespace, pod("package-pod", node, labels=ours))
    # The same label outside the package namespace proves nothing: that pod is evicted.
    other = f"{namespace}-x"
    cluster.kubectl("create", "namespace", other)
    try:
        wait_for(
            lambda: (
                cluster.kubectl("get", "serviceaccount", "default", "-n", other, check=False).returncode == 0
            ),
            what="default service account",
        )
        apply(cluster, other, pod("impostor", node, labels=ours))
        for ns, name in ((namespace, ds_pod), (namespace, "package-pod"), (other, "impostor")):
            wait_for(functools.partial(running, cluster, ns, name), what=f"{name} to run")
        request = drain_request("act-skip", node, package_namespace=namespace, force=True)
        report = await asyncio.wait_for(ActivityEnvironment().run(activities.drain, request), 30)
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false")
    assert report.evicted == (f"{other}/impostor",)
    assert set(report.skipped) == {f"{namespace}/{ds_pod}", f"{namespace}/package-pod"}
    assert running(cluster, namespace, ds_pod)
    assert running(cluster, namespace, "package-pod")


async def test_a_pdb_holds_the_drain_visibly_until_it_is_relaxed(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node, profile = next(spare_nodes), "act-pdb"
    apply(cluster, namespace, pod("trainer-0", node, labels={"app": "trainer"}))
    pdb: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer-budget"},
        "spec": {"selector": {"matchLabels": {"app": "trainer"}}, "minAvailable": 1},
    }
    apply(cluster, namespace, pdb)
    wait_for(
        lambda: (
            get_json(cluster, "pdb", "trainer-budget", "-n", namespace)
            .get("status", {})
            .get("currentHealthy")
            == 1
        ),
        what="the disruption controller to observe the PDB",
    )
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    task = asyncio.create_task(env.run(activities.drain, drain_request(profile, node, force=True)))

    def blocked() -> dict[str, Any] | None:
        shown = condition(cluster, node, profile)
        return shown if shown and shown["reason"] == "DrainBlocked" else None

    shown = await until(blocked, 30.0, "the DrainBlocked condition")
    assert shown["status"] == "False"
    assert f"{namespace}/trainer-0" in shown["message"]
    assert "trainer-budget" in shown["message"]
    assert "PodDisruptionBudget" in shown["message"]
    events = await until(lambda: node_events(cluster, node, "DrainBlocked"), 30.0, "the DrainBlocked event")
    assert "trainer-budget" in events[0]["note"]
    await asyncio.sleep(1.5)  # several refused passes
    assert not task.done()
    assert len(node_events(cluster, node, "DrainBlocked")) == 1, "one event per distinct block, not per pass"
    assert any("trainer-budget" in json.dumps(b) and "trainer-0" in json.dumps(b) for b in beats)

    pdb["spec"]["minAvailable"] = 0
    apply(cluster, namespace, pdb)
    report = await asyncio.wait_for(task, 30)
    assert report.evicted == (f"{namespace}/trainer-0",)
    assert report.blocked_seconds >= 1.0
    cleared = condition(cluster, node, profile)
    assert cleared is not None
    assert cleared["reason"] == "Drained"
    assert cleared["status"] == "Unknown"


async def test_an_unmanaged_pod_without_force_times_the_drain_out(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node, profile = next(spare_nodes), "act-timeout"
    apply(cluster, namespace, pod("bare", node))
    wait_for(lambda: running(cluster, namespace, "bare"), what="the bare pod to run")
    request = drain_request(profile, node, timeoutSeconds=2, onTimeout="fail-node")
    with pytest.raises(ApplicationError) as failure:
        await asyncio.wait_for(ActivityEnvironment().run(activities.drain, request), 30)
    assert failure.value.type == "DrainTimeout"
    assert failure.value.non_retryable
    assert f"{namespace}/bare: UnmanagedPod" in str(failure.value)
    assert condition(cluster, node, profile)["reason"] == "DrainTimeout"  # type: ignore[index]
    assert running(cluster, namespace, "bare"), "an unmanaged pod is never evicted without force"


async def test_drain_timeout_with_on_timeout_wait_keeps_waiting_visibly(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node, profile = next(spare_nodes), "act-wait"
    apply(cluster, namespace, pod("lingering", node))
    wait_for(lambda: running(cluster, namespace, "lingering"), what="the bare pod to run")
    request = drain_request(profile, node, timeoutSeconds=1, onTimeout="wait")
    task = asyncio.create_task(ActivityEnvironment().run(activities.drain, request))

    def timed_out() -> dict[str, Any] | None:
        shown = condition(cluster, node, profile)
        return shown if shown and shown["reason"] == "DrainTimeout" else None

    shown = await until(timed_out, 30.0, "the DrainTimeout condition")
    assert f"{namespace}/lingering: UnmanagedPod" in shown["message"]
    await until(lambda: node_events(cluster, node, "DrainTimeout"), 30.0, "the DrainTimeout event")
    assert not task.done()
    cluster.kubectl("delete", "pod", "lingering", "-n", namespace, "--wait=false")
    report = await asyncio.wait_for(task, 30)
    assert report.evicted == ()
    assert condition(cluster, node, profile)["reason"] == "Drained"  # type: ignore[index]


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "shared"}}, **spec},
    }


async def test_two_budgets_on_one_pod_are_a_named_block_that_counts_toward_the_timeout(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node, profile = next(spare_nodes), "act-multi"
    apply(cluster, namespace, pod("shared-0", node, labels={"app": "shared"}))
    apply(cluster, namespace, budget("first", minAvailable=0))
    apply(cluster, namespace, budget("second", maxUnavailable=1))
    wait_for(lambda: running(cluster, namespace, "shared-0"), what="the pod to run")
    request = drain_request(profile, node, timeoutSeconds=3, force=True)
    with pytest.raises(ApplicationError) as failure:
        await asyncio.wait_for(ActivityEnvironment().run(activities.drain, request), 30)
    assert failure.value.type == "DrainTimeout"
    assert f"{namespace}/shared-0: MultiplePodDisruptionBudgets" in str(failure.value)
    assert running(cluster, namespace, "shared-0")


async def test_disable_eviction_deletes_past_a_budget(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    apply(cluster, namespace, pod("shared-0", node, labels={"app": "shared"}))
    apply(cluster, namespace, budget("strict", minAvailable=1))
    wait_for(lambda: running(cluster, namespace, "shared-0"), what="the pod to run")
    request = drain_request("act-delete", node, force=True, disableEviction=True)
    report = await asyncio.wait_for(ActivityEnvironment().run(activities.drain, request), 30)
    assert report.evicted == (f"{namespace}/shared-0",)
