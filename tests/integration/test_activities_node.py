"""The node activities against the real control plane: kwok nodes, the real Job, disruption and
DaemonSet controllers, the real Eviction API. Each test uses its own nodes, namespace and profile
name, and calls the activities the way a worker would, through ``ActivityEnvironment``."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import (
    NODE_FINISHED_SIGNAL,
    CordonReport,
    CordonRequest,
    DrainRequest,
    NodePhase,
    NodeReport,
    NodeResult,
    NodeStatusRequest,
    NodeTarget,
    ProtectedPodsRequest,
    RecordStateRequest,
    StageRequest,
    StagesRequest,
    StatusNote,
    UncordonRequest,
)
from fleetwright.api.common import LabelSelector
from fleetwright.api.keys import BOOT_ID_BEFORE_ANNOTATION, condition_type, state_key, status_label_key
from fleetwright.api.nodeprofile import DrainSpec, Package
from fleetwright.kube import client as kube_client
from fleetwright.kube import jobs as kube_jobs
from fleetwright.kube.jobwatch import JobWatches
from fleetwright.localcluster import nodes as fleet_nodes
from fleetwright.localcluster.kubelet import SimulatedKubelet
from fleetwright.localcluster.nodes import stage_pod_timing
from fleetwright.planner.interrupts import REBOOT
from fleetwright.planner.nodestate import NodePackageState, PackageRecord, parse_annotation
from fleetwright.planner.observations import RunStatus
from fleetwright.planner.stages import Stage
from fleetwright.stagejob.outcome import StageOutcome
from tests.support.engine import wait_for
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration

FAST_POD = stage_pod_timing(0.3)
AGENT = "registry.example/fleetwright/agent:0.1.0"


async def async_wait_for(predicate: Callable[[], Any], what: str) -> Any:
    return await asyncio.to_thread(wait_for, predicate, 30.0, what)


def get_json(cluster: ClusterUnderTest, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def apply(cluster: ClusterUnderTest, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


@pytest.fixture(scope="module")
def activities(cluster: ClusterUnderTest) -> NodeActivities:
    return NodeActivities(kube_client.from_kubeconfig(cluster.kubeconfig))


@pytest.fixture(scope="module")
def spare_nodes(cluster: ClusterUnderTest) -> Iterator[str]:
    """A pool of this module's own kwok nodes, handed out one per use."""
    return iter(cluster.add_nodes(26))


@pytest.fixture
def namespace(cluster: ClusterUnderTest, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"a-{request.node.name.replace('_', '-')[:40].lower()}".rstrip("-")
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        what="default service account",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def pod(name: str, node: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.example/app:1"}]},
    }


def condition(cluster: ClusterUnderTest, node: str, profile: str) -> dict[str, Any] | None:
    conditions = get_json(cluster, "node", node)["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == condition_type(profile)), None)


def node_events(cluster: ClusterUnderTest, node: str, reason: str) -> list[dict[str, Any]]:
    items = get_json(cluster, "events.v1.events.k8s.io", "-n", "default")["items"]
    return [e for e in items if e["regarding"]["name"] == node and e.get("reason") == reason]


def running(cluster: ClusterUnderTest, namespace: str, name: str) -> bool:
    return bool(get_json(cluster, "pod", name, "-n", namespace).get("status", {}).get("phase") == "Running")


# ----- cordon --------------------------------------------------------------------------------


async def test_cordon_is_ours_and_a_foreign_cordon_is_never_lifted(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str]
) -> None:
    env = ActivityEnvironment()
    ours, foreign = next(spare_nodes), next(spare_nodes)
    updating = StatusNote(phase=NodePhase.IN_PROGRESS, reason="Updating", message="act-cordon: apply")
    cordon = CordonRequest(profile="act-cordon", node=ours, show_before=updating)
    report = await env.run(activities.cordon, cordon)
    assert report == CordonReport(ours=True, foreign=False)
    assert get_json(cluster, "node", ours)["spec"]["unschedulable"] is True
    assert (condition(cluster, ours, "act-cordon") or {}).get("reason") == "Updating", (
        "the first status rides on the cordon"
    )
    assert await env.run(activities.cordon, cordon) == report
    done = StatusNote(phase=NodePhase.COMPLETE, reason="Complete")
    uncordon = UncordonRequest(profile="act-cordon", node=ours, show_after=done)
    assert await env.run(activities.uncordon, uncordon) is True
    assert not get_json(cluster, "node", ours)["spec"].get("unschedulable")
    assert (condition(cluster, ours, "act-cordon") or {}).get("reason") == "Complete", (
        "the last status rides on the uncordon"
    )

    cluster.kubectl("cordon", foreign)
    report = await env.run(activities.cordon, CordonRequest(profile="act-cordon", node=foreign))
    assert report == CordonReport(ours=False, foreign=True)
    assert await env.run(activities.uncordon, UncordonRequest(profile="act-cordon", node=foreign)) is False
    assert get_json(cluster, "node", foreign)["spec"]["unschedulable"] is True


# ----- protected pods ------------------------------------------------------------------------


PROTECTED = LabelSelector(match_labels={"fleetwright-test/protected": "true"})


async def test_protected_pods_hold_the_node_visibly_until_they_go(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node, profile = next(spare_nodes), "act-protected"
    apply(cluster, namespace, pod("trainer", node, labels={"fleetwright-test/protected": "true"}))
    wait_for(lambda: running(cluster, namespace, "trainer"), what="the protected pod to run")
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    request = ProtectedPodsRequest(profile=profile, node=node, selector=PROTECTED, timeout_seconds=60)
    task = asyncio.create_task(env.run(activities.wait_protected_pods, request))

    shown = await async_wait_for(lambda: condition(cluster, node, profile), what="the blocked condition")
    assert shown["status"] == "False"
    assert shown["reason"] == "NonInterruptPodsRunning"
    assert f"{namespace}/trainer" in shown["message"]
    assert get_json(cluster, "node", node)["metadata"]["labels"][status_label_key(profile)] == "Blocked"
    events = await async_wait_for(lambda: node_events(cluster, node, "NonInterruptPodsRunning"), what="event")
    assert f"{namespace}/trainer" in events[0]["note"]
    assert not task.done()

    cluster.kubectl("delete", "pod", "trainer", "-n", namespace, "--wait=false")
    await asyncio.wait_for(task, 30)
    assert condition(cluster, node, profile)["reason"] == "ProtectedPodsGone"  # type: ignore[index]
    assert len(node_events(cluster, node, "NonInterruptPodsRunning")) == 1
    assert any(f"{namespace}/trainer" in json.dumps(b) for b in beats)


async def test_protected_pods_wait_is_bounded_and_an_empty_selector_matches_nothing(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    apply(cluster, namespace, pod("held", node, labels={"fleetwright-test/protected": "true"}))
    wait_for(lambda: running(cluster, namespace, "held"), what="the protected pod to run")
    env = ActivityEnvironment()
    empty = ProtectedPodsRequest(profile="act-bound", node=node, selector=LabelSelector(), timeout_seconds=1)
    await env.run(activities.wait_protected_pods, empty)  # returns at once despite the running pod

    bounded = ProtectedPodsRequest(profile="act-bound", node=node, selector=PROTECTED, timeout_seconds=2)
    with pytest.raises(ApplicationError) as failure:
        await env.run(activities.wait_protected_pods, bounded)
    assert failure.value.type == "ProtectedPodsTimeout"
    assert failure.value.non_retryable
    assert f"{namespace}/held" in str(failure.value)


# ----- drain ---------------------------------------------------------------------------------


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

    await async_wait_for(terminating, what="the eviction to be accepted")
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

    shown = await async_wait_for(blocked, what="the DrainBlocked condition")
    assert shown["status"] == "False"
    assert f"{namespace}/trainer-0" in shown["message"]
    assert "trainer-budget" in shown["message"]
    assert "PodDisruptionBudget" in shown["message"]
    events = await async_wait_for(
        lambda: node_events(cluster, node, "DrainBlocked"), what="the DrainBlocked event"
    )
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

    shown = await async_wait_for(timed_out, what="the DrainTimeout condition")
    assert f"{namespace}/lingering: UnmanagedPod" in shown["message"]
    await async_wait_for(lambda: node_events(cluster, node, "DrainTimeout"), what="the DrainTimeout event")
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


# ----- stage Jobs ----------------------------------------------------------------------------


def package(name: str = "tuning", **extra: Any) -> Package:
    return Package.model_validate(
        {
            "name": name,
            "version": "1.0.0",
            "image": "registry.example/fleetwright/packages/tuning",
            "stageTimeoutSeconds": 120,
            **extra,
        }
    )


def stage_request(node: str, namespace: str, pkg: Package, **extra: Any) -> StageRequest:
    return StageRequest(
        profile="act-stage",
        node=node,
        profile_uid="0b1c",
        generation=3,
        package=pkg,
        stage=extra.pop("stage", Stage.APPLY),
        agent_image=AGENT,
        namespace=namespace,
        pod_annotations=extra.pop("pod_annotations", FAST_POD),
        **extra,
    )


def jobs_in(cluster: ClusterUnderTest, namespace: str) -> list[dict[str, Any]]:
    return list(get_json(cluster, "jobs", "-n", namespace)["items"])


def applied(profile: str) -> NodePackageState:
    """A package state for a stage or a reboot wait to record once it succeeded."""
    return NodePackageState(profile=profile, packages={"tuning": PackageRecord(version="1.0.0")})


def recorded(cluster: ClusterUnderTest, node: str, profile: str) -> NodePackageState | None:
    value = get_json(cluster, "node", node)["metadata"]["annotations"].get(state_key(profile))
    return None if value is None else parse_annotation(state_key(profile), value)


async def test_a_stage_job_completes_and_a_rerun_adopts_it(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = stage_request(
        node,
        namespace,
        package(configMap={"sysctl.conf": "vm.swappiness=10\n"}),
        record=applied("act-stage"),
    )
    env = ActivityEnvironment()
    first, second = await asyncio.wait_for(
        asyncio.gather(env.run(activities.run_stage, request), env.run(activities.run_stage, request)), 60
    )
    assert recorded(cluster, node, "act-stage") == applied("act-stage"), "the stage recorded its state"
    again = await env.run(activities.run_stage, request)
    assert first.outcome is StageOutcome.SUCCEEDED
    assert first.job == second.job == again.job
    assert again.succeeded
    assert first.started_at is not None
    assert first.finished_at is not None
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["name"] == first.job
    template = job["spec"]["template"]["spec"]
    assert template["nodeName"] == node
    copier = template["initContainers"][0]
    assert {
        "name": "package-config",
        "mountPath": "/skyhook-package/configmaps/sysctl.conf",
        "subPath": "sysctl.conf",
    } in copier["volumeMounts"]
    config = get_json(cluster, "configmap", "act-stage-tuning-1.0.0", "-n", namespace)
    assert config["data"] == {"sysctl.conf": "vm.swappiness=10\n"}


class RecordedSignals:
    """A client that records the signals sent through it (the node's report to its rollout)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, workflow_id: str) -> Any:
        sent = self.sent

        class Handle:
            async def signal(self, name: str, arg: Any) -> None:
                sent.append((workflow_id, name, arg))

        return Handle()


async def test_stages_retried_after_the_last_one_passed_show_complete_and_report_again(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    """A crash between the last stage's record and what shows after it: the retry runs no stage
    again, and the node still shows Complete and its rollout still hears of it."""
    node = next(spare_nodes)
    result = NodeResult(node=node, target="t", status=RunStatus.SUCCEEDED, message="complete")
    done = StatusNote(
        phase=NodePhase.COMPLETE,
        reason="Complete",
        report=NodeReport(rollout_workflow_id="nodeprofile/act-stage", result=result),
    )
    stage = stage_request(node, namespace, package(), record=applied("act-stage"))
    signals = RecordedSignals()
    env = ActivityEnvironment(client=cast(Client, signals))
    crashed = StagesRequest(profile="act-stage", node=node, stages=(stage,))
    first = await asyncio.wait_for(env.run(activities.run_stages, crashed), 60)
    assert first.passed == 1
    assert not signals.sent
    env.info = dataclasses.replace(env.info, attempt=2)
    retried = crashed.model_copy(update={"stages": (stage.model_copy(update={"show_after": done}),)})
    again = await asyncio.wait_for(env.run(activities.run_stages, retried), 30)
    assert again.resumed == 1
    assert again.passed == 1
    assert (condition(cluster, node, "act-stage") or {}).get("reason") == "Complete"
    assert signals.sent == [("nodeprofile/act-stage", NODE_FINISHED_SIGNAL, result)]
    assert len(jobs_in(cluster, namespace)) == 1


async def test_an_interrupt_stage_runs_the_encoded_interrupt(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = stage_request(node, namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT)
    report = await asyncio.wait_for(ActivityEnvironment().run(activities.run_stage, request), 60)
    assert report.succeeded
    [job] = jobs_in(cluster, namespace)
    [agent] = job["spec"]["template"]["spec"]["initContainers"]
    assert agent["args"][0] == "interrupt"
    assert json.loads(base64.b64decode(agent["args"][3])) == {"type": "node_restart"}


async def test_a_reboot_stage_waits_for_the_new_boot_id_and_a_retry_compares_with_the_old_one(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    """The boot id read, the interrupt Job and the reboot wait in one activity: the boot id from
    before the Job is kept on it, so an attempt retried after the reboot does not wait for another."""
    node = next(spare_nodes)
    before, after = fleet_nodes.boot_id(node), fleet_nodes.boot_id(node, generation=1)
    request = stage_request(
        node,
        namespace,
        package(),
        stage=Stage.INTERRUPT,
        interrupt=REBOOT,
        record=applied("act-stage"),
        reboot_timeout_seconds=60,
        show_after=StatusNote(phase=NodePhase.COMPLETE, reason="Complete"),
    )
    env = ActivityEnvironment()
    with SimulatedKubelet(cluster.kubectl, namespace=namespace):
        report = await asyncio.wait_for(env.run(activities.run_stage, request), 90)
    assert report.succeeded
    assert get_json(cluster, "node", node)["status"]["nodeInfo"]["bootID"] == after
    assert recorded(cluster, node, "act-stage") == applied("act-stage"), "recorded once back"
    assert (condition(cluster, node, "act-stage") or {}).get("reason") == "Complete"
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["annotations"][BOOT_ID_BEFORE_ANNOTATION] == before
    again = await asyncio.wait_for(env.run(activities.run_stage, request), 30)  # adopts, is back
    assert again.job == report.job
    assert again.succeeded

    quiet = stage_request(node, namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT)
    quiet = quiet.model_copy(update={"attempt": 1, "reboot_timeout_seconds": 2})
    with pytest.raises(ApplicationError) as failure:  # no simulated kubelet: the node never reboots
        await asyncio.wait_for(env.run(activities.run_stage, quiet), 60)
    assert failure.value.type == "RebootTimeout"
    assert failure.value.non_retryable


async def test_a_failing_stage_is_a_report_and_its_job_is_kept(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = stage_request(
        node,
        namespace,
        package(),
        pod_labels={"sim.fleetwright.io/outcome": "fail"},
        backoff_limit=0,
        record=applied("act-stage"),
    )
    report = await asyncio.wait_for(ActivityEnvironment().run(activities.run_stage, request), 60)
    assert report.outcome is StageOutcome.FAILED
    assert recorded(cluster, node, "act-stage") is None, "a failed stage records nothing"
    assert "BackoffLimitExceeded" in report.message
    assert "exited 1" in report.message
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["name"] == report.job


async def test_an_image_that_never_pulls_fails_the_stage_after_the_bound(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = stage_request(
        node,
        namespace,
        package(),
        pod_labels={"sim.fleetwright.io/outcome": "image-pull-backoff"},
        image_pull_timeout_seconds=2,
    )
    env = ActivityEnvironment()
    report = await asyncio.wait_for(env.run(activities.run_stage, request), 60)
    assert report.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert "ImagePullBackOff" in report.message
    assert "registry.example/fleetwright/packages/tuning:1.0.0" in report.message
    [job] = jobs_in(cluster, namespace)
    assert job["spec"]["suspend"] is True, "the stuck pod must stop pulling"
    again = await asyncio.wait_for(env.run(activities.run_stage, request), 10)
    assert again.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert len(jobs_in(cluster, namespace)) == 1


async def test_stages_wait_on_the_shared_job_watch(
    cluster: ClusterUnderTest, spare_nodes: Iterator[str], namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in the worker process: once the watch has listed, a stage reads its Job from the API at
    most once (just created) and never watches it itself; the pod watch sees its pod succeed; a Job
    deleted mid-stage ends the stage."""
    calls: list[str] = []
    for name in ("read_job", "wait_for_job"):
        real = getattr(kube_jobs, name)
        monkeypatch.setattr(kube_jobs, name, functools.partial(_counted, real, name, calls))
    with JobWatches(kube_client.from_kubeconfig(cluster.kubeconfig)) as watches:
        watched = NodeActivities(kube_client.from_kubeconfig(cluster.kubeconfig), job_watches=watches)
        env = ActivityEnvironment()
        first = stage_request(next(spare_nodes), namespace, package())
        assert (await asyncio.wait_for(env.run(watched.run_stage, first), 60)).succeeded
        await async_wait_for(lambda: watches.of(namespace).synced, what="the watch to list")
        calls.clear()
        second = stage_request(next(spare_nodes), namespace, package(name="kdump"))
        report = await asyncio.wait_for(env.run(watched.run_stage, second), 60)
        assert report.succeeded
        assert calls.count("wait_for_job") == 0
        assert calls.count("read_job") <= 1
        seen = watches.of(namespace).get(report.job)
        assert seen is not None
        success = watches.of(namespace).succeeded(seen)
        assert success is not None, "the pod watch saw the stage's pod succeed"
        assert success.at is not None

        slow = stage_request(
            next(spare_nodes), namespace, package(name="slow"), pod_annotations=stage_pod_timing(60)
        )
        running = asyncio.ensure_future(env.run(watched.run_stage, slow))
        [job] = await async_wait_for(
            lambda: [
                j
                for j in jobs_in(cluster, namespace)
                if j["metadata"]["labels"].get("fleetwright.io/package") == "slow"
                and j.get("status", {}).get("active")
            ],
            what="the slow stage to run",
        )
        cluster.kubectl("delete", "job", job["metadata"]["name"], "-n", namespace, "--wait=false")
        deleted = await asyncio.wait_for(running, 30)
        assert deleted.outcome is StageOutcome.FAILED
        assert "deleted" in deleted.message


def _counted(real: Callable[..., Any], name: str, calls: list[str], *args: Any) -> Any:
    calls.append(name)
    return real(*args)


# ----- reboot --------------------------------------------------------------------------------


async def test_reboot_wait_sees_the_new_boot_id_and_is_bounded(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    """After its interrupt Job, a reboot stage waits for a new boot id (nothing recorded until the
    node is back), and gives up after its bound."""
    node, quiet = next(spare_nodes), next(spare_nodes)
    env = ActivityEnvironment()
    after = fleet_nodes.boot_id(node, generation=1)
    wait = stage_request(
        node,
        namespace,
        package(),
        stage=Stage.INTERRUPT,
        interrupt=REBOOT,
        record=applied("act-reboot"),
        reboot_timeout_seconds=60,
    ).model_copy(update={"profile": "act-reboot"})
    task = asyncio.create_task(env.run(activities.run_stage, wait))
    await async_wait_for(
        lambda: [j for j in jobs_in(cluster, namespace) if j.get("status", {}).get("succeeded")],
        what="the interrupt Job to finish",
    )
    await asyncio.sleep(1)
    assert not task.done()
    assert recorded(cluster, node, "act-reboot") is None
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["annotations"][BOOT_ID_BEFORE_ANNOTATION] == fleet_nodes.boot_id(node)
    cluster.kubectl("annotate", "node", node, f"{fleet_nodes.REBOOT_ANNOTATION}={after}")
    assert (await asyncio.wait_for(task, 30)).succeeded
    assert get_json(cluster, "node", node)["status"]["nodeInfo"]["bootID"] == after
    assert recorded(cluster, node, "act-reboot") == applied("act-reboot"), "recorded once back"

    stuck = stage_request(
        quiet,
        namespace,
        package(),
        stage=Stage.INTERRUPT,
        interrupt=REBOOT,
        record=applied("act-reboot"),
        reboot_timeout_seconds=2,
    ).model_copy(update={"profile": "act-reboot"})
    with pytest.raises(ApplicationError) as failure:
        await asyncio.wait_for(env.run(activities.run_stage, stuck), 60)
    assert failure.value.type == "RebootTimeout"
    assert failure.value.non_retryable
    assert recorded(cluster, quiet, "act-reboot") is None


async def test_a_cancelled_wait_stops(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    env = ActivityEnvironment()
    wait = stage_request(
        node, namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT, reboot_timeout_seconds=60
    )
    task = asyncio.create_task(env.run(activities.run_stage, wait))
    await async_wait_for(
        lambda: [j for j in jobs_in(cluster, namespace) if j.get("status", {}).get("succeeded")],
        what="the interrupt Job to finish",
    )
    await asyncio.sleep(1)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 15)


# ----- state and status ----------------------------------------------------------------------


async def test_record_state_round_trips_through_the_planner_parser(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str]
) -> None:
    node = next(spare_nodes)
    state = NodePackageState(
        profile="act-state",
        packages={"tuning": PackageRecord(version="1.0.0", config={"sysctl.conf": "0123456789abcdef"})},
    )
    await ActivityEnvironment().run(
        activities.record_state, RecordStateRequest(profile="act-state", node=node, state=state)
    )
    annotations = get_json(cluster, "node", node)["metadata"]["annotations"]
    key = state_key("act-state")
    assert parse_annotation(key, annotations[key]) == state
    assert annotations[fleet_nodes.KWOK_ANNOTATION], "other annotations are untouched"


async def test_set_status_writes_label_condition_and_one_event(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str]
) -> None:
    node, profile = next(spare_nodes), "act-status-" + "x" * 60  # long: keys must be shortened
    env = ActivityEnvironment()
    failed = NodeStatusRequest(
        profile=profile,
        node=node,
        phase=NodePhase.FAILED,
        reason="StageFailed",
        message="apply-check exited 1",
    )
    await env.run(activities.set_node_status, failed)
    await env.run(activities.set_node_status, failed)  # a retried activity says it once
    node_json = get_json(cluster, "node", node)
    label = status_label_key(profile)
    assert len(label.split("/")[1]) <= 63
    assert node_json["metadata"]["labels"][label] == "Failed"
    shown = condition(cluster, node, profile)
    assert shown is not None
    assert (shown["status"], shown["reason"], shown["message"]) == (
        "False",
        "StageFailed",
        "apply-check exited 1",
    )
    [event] = node_events(cluster, node, "StageFailed")
    assert event["type"] == "Warning"
    assert "apply-check exited 1" in event["note"]
    assert event["regarding"]["uid"] == node_json["metadata"]["uid"]

    done = NodeStatusRequest(profile=profile, node=node, phase=NodePhase.COMPLETE, reason="Complete")
    await env.run(activities.set_node_status, done)
    assert get_json(cluster, "node", node)["metadata"]["labels"][label] == "Complete"
    assert condition(cluster, node, profile)["status"] == "True"  # type: ignore[index]
    kubelet_ready = [
        c for c in get_json(cluster, "node", node)["status"]["conditions"] if c["type"] == "Ready"
    ]
    assert [c["status"] for c in kubelet_ready] == ["True"], "the kubelet's conditions stay"


async def test_a_deleted_node_is_gone_for_work_and_done_for_status_and_undo(
    activities: NodeActivities, namespace: str
) -> None:
    # The real 404s: work on a missing Node says NodeGone (the node workflow ends: it left the
    # fleet); showing status, uncordoning and releasing the taint on it are done already.
    env = ActivityEnvironment()
    target = NodeTarget(profile="act-gone", node="no-such-node")
    await env.run(
        activities.set_node_status,
        NodeStatusRequest(profile="act-gone", node="no-such-node", phase=NodePhase.FAILED, reason="X"),
    )
    uncordon = UncordonRequest(profile="act-gone", node="no-such-node", show_after=None)
    assert await env.run(activities.uncordon, uncordon) is False
    assert (await env.run(activities.release_runtime_taint, target)).removed is False
    state = NodePackageState(profile="act-gone")
    record = RecordStateRequest(profile="act-gone", node="no-such-node", state=state)
    # A reboot stage reads the node's boot id before it creates its Job.
    reboot = stage_request(
        "no-such-node", namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT
    ).model_copy(update={"profile": "act-gone", "reboot_timeout_seconds": 60})
    work: list[Callable[[], Awaitable[object]]] = [
        lambda: env.run(activities.cordon, CordonRequest(profile="act-gone", node="no-such-node")),
        lambda: env.run(activities.run_stage, reboot),
        lambda: env.run(activities.record_state, record),
    ]
    for call in work:
        with pytest.raises(ApplicationError) as gone:
            await call()
        assert gone.value.type == "NodeGone"
        assert gone.value.non_retryable
