"""The node gate end to end: the real control plane (kwok nodes, stage Jobs, the simulated kubelet's
reboots), the Temporal dev server, the real activities and a real Prometheus (Debian's) scraping
the GPU exporter the tests drive. A node whose XID series changes during its gate fails naming the
check and value and, with ``action: rollback``, its batch is rolled back; a node with no series is
Inconclusive and the rollout waits, named, until ``fleetwright approve`` passes it; a worker
stopped mid-gate is replaced without a measurement counted twice, and one stopped mid-validation
without a second validation Job; a failing validation Job fails the node, keeps it cordoned, and
``fleetwright logs`` shows its output; a Prometheus frozen mid-gate holds the node named
MonitoringUnavailable, with nothing failed, until it answers again; a node whose change needs no
interrupt fails its gate cordoned (no new pod lands) but not drained (its pod keeps running); a
node with XID 79 at its gate under rollback is returned, fails its gate again and stays cordoned as
hardware suspect, its node workflow re-gating it, until a run passes once its XID series is clean
(back in service by itself) or ``fleetwright release`` ends that. The fleet gate, during a soak or
in the background while a batch runs, halts before the next batch when the updated nodes' XID
series changes; a Prometheus frozen while either measures holds it named MonitoringUnavailable,
nothing failed and no failure action fired, until it answers again and the rollout completes by
itself; with Prometheus still frozen, ``fleetwright approve`` passes a held soak and ``abort`` ends
a rollout held there."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from fleetwright.activities.payloads import NAMES
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.keys import NodeReason, condition_type
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.local.gpuexporter import XID_ERRORS, GpuExporter
from fleetwright.local.kwok import STAGE_LOG
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.local.prometheus import LocalPrometheus
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.planner.node.state import read_profile_state
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id, rollout_workflow_id
from fleetwright.workflows.node import NodeWorkflow
from fleetwright.workflows.payloads import NodeResult, Progress, RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.cli import Cli
from tests.support.engine import (
    QUERY_TIMEOUT_SECONDS,
    engine_worker,
    kubectl_json,
    label_nodes,
    running_on,
    simulated_kubelet,
    unique,
)
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, engine_settings
from tests.support.waiting import query_progress, until, until_phase, until_progress

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

XID_CHECK = {
    "name": "gpu-xid-errors",
    "query": f'changes({XID_ERRORS}{{Hostname="{{{{node}}}}"}}[20s])',
    "successCondition": "all(r == 0 for r in result)",
    "failureCondition": "any(r > 0 for r in result)",
    "count": 3,
    "intervalSeconds": 2,
}


def settings(**changes: Any) -> EngineSettings:
    return engine_settings().model_copy(update={"search_attributes": False, **changes})


def checked_policy(
    steps: list[dict[str, Any]], max_unavailable: int, checks: list[dict[str, Any]], **spec: Any
) -> DeploymentPolicy:
    """The example policy through ``steps`` under ``max_unavailable`` with the health ``checks``
    and any other ``spec`` fields (by their CRD names)."""
    base = examples.policy(max_unavailable=max_unavailable, steps=steps)
    body = base.spec.model_dump(by_alias=True, exclude_none=True) | {"healthChecks": checks, **spec}
    return base.model_copy(update={"spec": type(base.spec).model_validate(body)})


def gated_policy(
    *, action: str = "halt", max_unavailable: int = 2, initial: int = 2, check: dict[str, Any] = XID_CHECK
) -> DeploymentPolicy:
    """Batches of ``initial``, each node's gate measuring ``check``."""
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": initial}}]
    gate = {"checks": [check["name"]]}
    return checked_policy(steps, max_unavailable, [check], nodeGate=gate, failure={"action": action})


def fleet_xid(window: str, **fields: Any) -> dict[str, Any]:
    """A fleet check that fails on any change of the updated nodes' XID series over ``window``."""
    return {
        "name": "fleet-xid",
        "query": f'sum(changes({XID_ERRORS}{{Hostname=~"{{{{nodes}}}}"}}[{window}]))',
        "successCondition": "result[0] == 0",
        "failureCondition": "result[0] > 0",
        **fields,
    }


def gpu_group(cluster: ClusterUnderTest, exporter: GpuExporter | None, count: int) -> tuple[str, list[str]]:
    """``count`` new nodes in a group of their own, each with two GPUs on the exporter (none when
    ``exporter`` is None: no series, no data)."""
    name = unique("g")
    nodes = cluster.add_nodes(count)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    if exporter is not None:
        for node in nodes:
            exporter.add_node(node, gpus=2)
    return name, nodes


@dataclass(frozen=True)
class Grouped:
    """New nodes in a group of their own (``gpu_group``) and the name of a profile over them."""

    name: str
    group: str
    nodes: list[str]
    interrupt: str | None

    def profile(self, version: str = "1.0.0", generation: int = 1) -> NodeProfile:
        return examples.profile(
            self.name,
            selector={GROUP_LABEL: self.group},
            interrupt=self.interrupt,
            version=version,
            generation=generation,
        )


async def grouped(
    cluster: ClusterUnderTest,
    exporter: GpuExporter | None,
    count: int,
    prefix: str,
    *,
    interrupt: str | None = "reboot",
    applied: bool = False,
) -> Grouped:
    """``count`` new nodes (``gpu_group``) and a profile named ``prefix``-... over them, applied to
    the cluster when ``applied`` (the CLI reads it)."""
    group, nodes = await asyncio.to_thread(gpu_group, cluster, exporter, count)
    made = Grouped(unique(prefix), group, nodes, interrupt)
    if applied:
        body = made.profile().model_dump(mode="json", by_alias=True, exclude_none=True)
        await asyncio.to_thread(cluster.kubectl, "apply", "-f", "-", input=json.dumps(body))
    return made


def reasons(cluster: ClusterUnderTest, profile: str, nodes: list[str]) -> dict[str, str]:
    """node -> the reason of the profile's condition on it."""
    found = {}
    for item in kubectl_json(cluster, "nodes")["items"]:
        if item["metadata"]["name"] in nodes:
            for condition in item.get("status", {}).get("conditions") or []:
                if condition["type"] == condition_type(profile):
                    found[item["metadata"]["name"]] = condition.get("reason", "")
    return found


async def xid_at_the_gate(
    cluster: ClusterUnderTest,
    handle: WorkflowHandle[RolloutWorkflow, Progress],
    change: SpecChange,
    nodes: list[str],
    exporter: GpuExporter,
) -> str:
    """Signal ``change``, then give the first of ``nodes`` to reach its health gate XID 79 on one
    GPU; that node."""
    await handle.signal(RolloutWorkflow.spec_changed, change)
    profile = change.profile.metadata.name
    gated = await until(
        lambda: [n for n, r in reasons(cluster, profile, nodes).items() if r == NodeReason.HEALTH_GATE],
        120.0,
        "a node at its health gate",
    )
    exporter.set(gated[0], XID_ERRORS, 79, gpu=1)
    return str(gated[0])


async def start(
    client: Client,
    queue: str,
    profile: NodeProfile,
    policy: DeploymentPolicy,
    engine: EngineSettings | None = None,
) -> WorkflowHandle[RolloutWorkflow, Progress]:
    rollout = RolloutInput(profile=profile, policy=policy, settings=engine or settings())
    return await client.start_workflow(
        RolloutWorkflow.run, rollout, id=rollout_workflow_id(profile.metadata.name), task_queue=queue
    )


@pytest.fixture
async def engine(
    cluster: ClusterUnderTest, temporal_client: Client, prometheus: LocalPrometheus
) -> AsyncIterator[str]:
    async with engine_worker(cluster, temporal_client, prometheus_url=prometheus.url) as queue:
        yield queue


async def measurements(client: Client, profile: str, node: str, activity: str = NAMES.MEASURE) -> int:
    """Measurement activities (or ``activity``) the node workflow scheduled (each recorded once
    in its history)."""
    history = await client.get_workflow_handle(node_workflow_id(profile, node)).fetch_history()
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    )


async def validation_attempts(client: Client, profile: str, node: str) -> list[int]:
    """The attempt each run-validation activity finished on (its started event is written then)."""
    history = await client.get_workflow_handle(node_workflow_id(profile, node)).fetch_history()
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == NAMES.RUN_VALIDATION
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


def validation_jobs(cluster: ClusterUnderTest, profile: str, node: str) -> list[dict[str, Any]]:
    selector = f"fleetwright.io/profile={profile},fleetwright.io/node={node},fleetwright.io/stage=validate"
    items: list[dict[str, Any]] = kubectl_json(cluster, "jobs", "-n", "fleetwright-system", "-l", selector)[
        "items"
    ]
    return items


def validated_policy(validation: dict[str, Any], check: dict[str, Any] | None = None) -> DeploymentPolicy:
    """One node at a time, its gate running ``validation`` (then ``check``, when given)."""
    base = gated_policy(max_unavailable=1, initial=1)
    spec = base.spec.model_dump(by_alias=True, exclude_none=True)
    spec["nodeGate"] = {"validations": [validation]}
    spec.pop("healthChecks")
    if check is not None:
        spec |= {
            "healthChecks": [check],
            "nodeGate": {"validations": [validation], "checks": [check["name"]]},
        }
    return base.model_copy(update={"spec": type(base.spec).model_validate(spec)})


DIAG = {
    "name": "dcgm-diag",
    "image": "ghcr.io/example/gpu-health:1.0.0",
    "command": ["chroot", "/host", "dcgmi"],
    "args": ["diag", "-r", "1"],
    "privileged": True,
    "resources": {"cpuRequest": "100m", "memoryLimit": "512Mi"},
}


async def test_an_xid_during_the_gate_fails_the_node_and_rolls_its_batch_back(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str, exporter: GpuExporter
) -> None:
    made = await grouped(cluster, exporter, 4, "hg")
    name, nodes = made.name, made.nodes
    v1, v2 = made.profile(), made.profile("1.1.0", generation=2)
    policy = gated_policy(action="rollback")
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, v1, policy)
        first = await until_phase(handle, "Complete", "Halted", within=300)
        assert first.phase == "Complete", first
        bad = await xid_at_the_gate(cluster, handle, SpecChange(profile=v2, policy=policy), nodes, exporter)
        rolling = await until_phase(handle, "RollingBack", "RolledBack", "Halted", within=120)
        assert rolling.phase in ("RollingBack", "RolledBack"), rolling
        done = await until_phase(handle, "RolledBack", "Halted", within=300)
    assert done.phase == "RolledBack", done
    # The rollback names the node, the check and the value that fired it.
    assert bad in rolling.message, rolling.message
    assert "gpu-xid-errors Failed" in rolling.message, rolling.message
    assert "last Failed [" in rolling.message, rolling.message
    for node in nodes:
        annotations = kubectl_json(cluster, "node", node)["metadata"].get("annotations", {})
        assert read_profile_state(annotations, name).packages["tuning"].version == "1.0.0", node


async def test_no_data_waits_named_until_approved_then_completes(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    temporal_server: LocalTemporal,
    engine: str,
) -> None:
    # The CLI reads the NodeProfile (its targeted nodes) and the rollout's progress.
    made = await grouped(cluster, None, 1, "hi", applied=True)
    (node,) = nodes = made.nodes
    name, profile = made.name, made.profile()
    cli = Cli(cluster, temporal_server)
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, profile, gated_policy(max_unavailable=1, initial=1))
        await until(
            lambda: reasons(cluster, name, nodes).get(node) == NodeReason.GATE_INCONCLUSIVE,
            180.0,
            "the Inconclusive gate",
        )
        status = await cli.ok("status", name)
        assert "health gate" in status, status
        assert f"gate/{node}" in status, status
        assert kubectl_json(cluster, "node", node)["spec"].get("unschedulable") is True
        refused = await cli.fails("approve", name, "gate/gpu-node-that-does-not-exist")
        assert "no running node workflow" in refused
        approved = await cli.ok("approve", name, f"gate/{node}")
        assert "approved the health gate" in approved, approved
        done = await until_phase(handle, "Complete", "Halted", within=120)
    assert done.phase == "Complete", done
    assert reasons(cluster, name, nodes)[node] == NodeReason.GATE_PASSED
    assert not kubectl_json(cluster, "node", node)["spec"].get("unschedulable")


def named_in_time(seconds: float, check: dict[str, Any]) -> bool:
    """An outage named within ``check``'s interval and the query's timeout, three times over for a
    slow, shared machine (a generous bound, not a timing claim)."""
    return seconds < 3 * (int(check["intervalSeconds"]) + QUERY_TIMEOUT_SECONDS)


def condition(cluster: ClusterUnderTest, profile: str, node: str) -> dict[str, str]:
    """The profile's condition on ``node`` ({} if none)."""
    conditions = kubectl_json(cluster, "node", node).get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == condition_type(profile)), {})


@contextlib.contextmanager
def frozen(prometheus: LocalPrometheus) -> Iterator[float]:
    """Prometheus frozen (SIGSTOP: it keeps its sockets and answers nothing) for the block, thawed
    whatever happens in it; yields when it froze."""
    frozen_at = time.monotonic()
    prometheus.process.freeze()
    try:
        yield frozen_at
    finally:
        prometheus.process.thaw()


async def test_a_frozen_prometheus_holds_the_node_named_and_the_rollout_completes_once_it_answers(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    temporal_server: LocalTemporal,
    engine: str,
    prometheus: LocalPrometheus,
    exporter: GpuExporter,
) -> None:
    made = await grouped(cluster, exporter, 1, "hm", applied=True)
    (node,) = nodes = made.nodes
    name, profile = made.name, made.profile()
    # Long enough a gate to freeze Prometheus in it; one Error in a row tolerated, the second holds.
    check: dict[str, Any] = {**XID_CHECK, "count": 8, "consecutiveErrorLimit": 1}
    policy = gated_policy(action="rollback", max_unavailable=1, initial=1, check=check)
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, profile, policy)
        await until(
            lambda: reasons(cluster, name, nodes).get(node) == NodeReason.HEALTH_GATE, 180.0, "the gate"
        )
        with frozen(prometheus) as frozen_at:
            await until(
                lambda: reasons(cluster, name, nodes).get(node) == NodeReason.MONITORING_UNAVAILABLE,
                120.0,
                "the node named MonitoringUnavailable",
            )
            named_after = time.monotonic() - frozen_at
            named = condition(cluster, name, node)["message"]
            assert "gpu-xid-errors MonitoringUnavailable (" in named, named
            assert "PrometheusUnavailable" in named, named
            # The second Error in a row (consecutiveErrorLimit 1) holds it: Blocked.
            await until(
                lambda: condition(cluster, name, node).get("status") == "False", 120.0, "the node held"
            )
            held_after = time.monotonic() - frozen_at
            status = await Cli(cluster, temporal_server).ok("status", name)
            assert "MonitoringUnavailable" in status, status
            assert "PrometheusUnavailable" in status, status
            assert f"gate/{node}" in status, status
            assert kubectl_json(cluster, "node", node)["spec"].get("unschedulable") is True
            progress = await query_progress(handle)
            assert progress is not None
            assert (progress.phase, progress.failed) == ("Progressing", 0), progress
        times = f"{named_after:.1f}s, held {held_after:.1f}s"
        print(f"Prometheus frozen -> node named MonitoringUnavailable: {times}")
        assert named_in_time(named_after, XID_CHECK), named_after
        done = await until_phase(handle, "Complete", "Halted", "RolledBack", within=180)
    assert (done.phase, done.failed) == ("Complete", 0), done
    assert reasons(cluster, name, nodes)[node] == NodeReason.GATE_PASSED
    assert not kubectl_json(cluster, "node", node)["spec"].get("unschedulable")


async def test_a_worker_stopped_mid_gate_is_replaced_without_recounting(
    cluster: ClusterUnderTest, temporal_client: Client, prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    made = await grouped(cluster, exporter, 1, "hw")
    (node,) = nodes = made.nodes
    name, profile = made.name, made.profile()
    policy = gated_policy(max_unavailable=1, initial=1, check={**XID_CHECK, "count": 4})
    with simulated_kubelet(cluster):
        async with engine_worker(cluster, temporal_client, prometheus_url=prometheus.url) as queue:
            handle = await start(temporal_client, queue, profile, policy)
            await until(
                lambda: reasons(cluster, name, nodes).get(node) == NodeReason.HEALTH_GATE,
                180.0,
                "the gate",
            )
            taken = await measurements(temporal_client, name, node)
        # The worker is gone mid-gate; a new one on the same queue carries the gate on.
        async with engine_worker(cluster, temporal_client, prometheus_url=prometheus.url, queue=queue):
            done = await until_phase(handle, "Complete", "Halted", within=180)
    assert done.phase == "Complete", done
    assert 1 <= taken < 4
    assert await measurements(temporal_client, name, node) == 4  # none taken twice


async def scraped(prometheus: LocalPrometheus, nodes: list[str]) -> None:
    """Until Prometheus holds the XID gauges of ``nodes`` (two GPUs each)."""
    await until(
        lambda: len(prometheus.query(f'{XID_ERRORS}{{Hostname=~"{"|".join(nodes)}"}}')) == 2 * len(nodes),
        60.0,
        "Prometheus to scrape the new nodes' XID gauges",
    )


async def test_a_fleet_gate_failure_during_the_soak_stops_the_next_batch(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str, exporter: GpuExporter
) -> None:
    made = await grouped(cluster, exporter, 3, "hf")
    name, nodes, profile = made.name, made.nodes, made.profile()
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 5, "checks": ["fleet-xid"]}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
    ]
    policy = checked_policy(steps, 2, [fleet_xid("30s", count=10, intervalSeconds=2)])
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, profile, policy)
        soaking = await until_progress(
            handle, lambda p: p.updated == 1 and "watch" in p.step, "the soak", within=180
        )
        (canary,) = [n for n in nodes if reasons(cluster, name, nodes).get(n) == NodeReason.COMPLETE]
        exporter.set(canary, XID_ERRORS, 48, gpu=0)
        halted = await until_phase(handle, "Halted", "Complete", within=60)
    assert soaking.running == 0
    assert halted.phase == "Halted", halted
    assert "soak watch: fleet gate failed: fleet-xid Failed" in halted.message, halted.message
    jobs = kubectl_json(cluster, "jobs", "-n", "fleetwright-system", "-l", f"fleetwright.io/profile={name}")
    assert {j["spec"]["template"]["spec"]["nodeName"] for j in jobs["items"]} <= {canary}  # no batch ran


async def test_a_background_fleet_gate_failure_while_a_batch_runs_stops_the_next_batch(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    engine: str,
    exporter: GpuExporter,
    prometheus: LocalPrometheus,
) -> None:
    made = await grouped(cluster, exporter, 4, "hb")
    name, profile = made.name, made.profile()
    # Prometheus must hold the gauges' first value (0) before the XID below changes it: a series
    # first scraped at 48 has no change for changes() to count.
    await scraped(prometheus, made.nodes)
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 1, "checks": ["fleet-xid"]}},
    ]
    policy = checked_policy(steps, 1, [fleet_xid("5m", count=3, intervalSeconds=1)])
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, profile, policy)
        trying = await until_progress(handle, lambda p: p.running == 1, "the canary", within=180)
        (canary,) = trying.running_nodes
        # An XID on the canary: the batches step's first measurement, a second after its first
        # batch started, sees it (changes() over 5 min) while that batch's node runs.
        exporter.set(canary, XID_ERRORS, 48, gpu=0)
        halted = await until_phase(handle, "Halted", "Complete", within=120)
    assert halted.phase == "Halted", halted
    assert "batches rest: fleet gate failed: fleet-xid Failed" in halted.message, halted.message
    jobs = kubectl_json(cluster, "jobs", "-n", "fleetwright-system", "-l", f"fleetwright.io/profile={name}")
    ran = {j["spec"]["template"]["spec"]["nodeName"] for j in jobs["items"]}
    assert canary in ran
    assert len(ran) == 2  # the canary and the first batch's node: no second batch


# A fleet check that sees no change on the updated nodes' GPUs over 5 minutes (a range an outage
# does not empty: the first answer after one still has samples); one Error in a row tolerated,
# the second holds the gate MonitoringUnavailable.
FLEET_XID = fleet_xid("5m", intervalSeconds=1, consecutiveErrorLimit=1)
SOAKED = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "watch", "soak": {"durationSeconds": 2, "checks": ["fleet-xid"]}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 1}},
]


def fleet_gated_policy(steps: list[dict[str, Any]], count: int) -> DeploymentPolicy:
    """One node at a time through ``steps``, their fleet gates measuring ``FLEET_XID`` ``count``
    times a run, a failure rolling back (so any failure action fired shows)."""
    return checked_policy(steps, 1, [{**FLEET_XID, "count": count}], failure={"action": "rollback"})


async def gpu_profile(
    cluster: ClusterUnderTest, exporter: GpuExporter, prometheus: LocalPrometheus, count: int
) -> NodeProfile:
    """A rebooting profile over ``count`` new GPU nodes Prometheus already scrapes, applied (the
    CLI reads it)."""
    made = await grouped(cluster, exporter, count, "ho", applied=True)
    await scraped(prometheus, made.nodes)
    return made.profile()


def in_the_soak(progress: Progress) -> bool:
    """The canary updated, the rollout in the ``watch`` soak of ``SOAKED``."""
    return progress.updated == 1 and "watch" in progress.step


def named(progress: Progress, gate: str) -> bool:
    """The rollout names ``gate`` (e.g. ``soak watch``) MonitoringUnavailable (from the first Error)."""
    return f"{gate} fleet gate MonitoringUnavailable: fleet-xid MonitoringUnavailable (" in progress.message


def held(progress: Progress, gate: str) -> bool:
    """The rollout holds ``gate`` MonitoringUnavailable (past consecutiveErrorLimit)."""
    held = "fleet-xid MonitoringUnavailable (held: "
    return named(progress, gate) and held in progress.message


async def until_held(
    handle: WorkflowHandle[RolloutWorkflow, Progress], gate: str, frozen_at: float
) -> Progress:
    """The first progress holding ``gate``, after the first naming it (in time): no failure phase
    (Progressing while a node runs, else Waiting: it goes on by itself), nothing failed. Prints
    the times from the freeze."""
    shown = await until_progress(handle, lambda p: named(p, gate), f"{gate} named", within=120)
    named_after = time.monotonic() - frozen_at
    assert shown.phase in ("Progressing", "Waiting"), shown
    assert shown.failed == 0, shown
    assert "PrometheusUnavailable" in shown.message, shown.message
    shown = await until_progress(handle, lambda p: held(p, gate), f"{gate} held", within=120)
    held_after = time.monotonic() - frozen_at
    print(
        f"Prometheus frozen -> {gate} named MonitoringUnavailable: {named_after:.1f}s, held {held_after:.1f}s"
    )
    assert named_in_time(named_after, FLEET_XID), named_after
    assert shown.phase in ("Progressing", "Waiting"), shown
    assert shown.failed == 0, shown
    assert "PrometheusUnavailable" in shown.message, shown.message
    return shown


async def test_a_frozen_prometheus_holds_the_soak_named_and_the_rollout_completes_once_it_answers(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    temporal_server: LocalTemporal,
    engine: str,
    prometheus: LocalPrometheus,
    exporter: GpuExporter,
) -> None:
    profile = await gpu_profile(cluster, exporter, prometheus, 2)
    # Enough measurements that the soak is still measuring when Prometheus freezes.
    policy = fleet_gated_policy(SOAKED, count=12)
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, profile, policy)
        await until_progress(handle, in_the_soak, "the soak", within=180)
        with frozen(prometheus) as frozen_at:
            shown = await until_held(handle, "soak watch", frozen_at)
            assert "waiting for Prometheus to answer (measuring on)" in shown.message, shown.message
            assert (shown.phase, shown.updated) == ("Waiting", 1), shown  # the next batch held
            status = await Cli(cluster, temporal_server).ok("status", profile.metadata.name)
            assert "soak watch fleet gate MonitoringUnavailable" in status, status
        done = await until_phase(handle, "Complete", "Halted", "RolledBack", within=180)
    assert (done.phase, done.failed, done.updated) == ("Complete", 0, 2), done


async def test_a_frozen_prometheus_holds_new_batches_named_and_the_rollout_completes_once_it_answers(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    engine: str,
    prometheus: LocalPrometheus,
    exporter: GpuExporter,
) -> None:
    profile = await gpu_profile(cluster, exporter, prometheus, 4)
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 1, "checks": ["fleet-xid"]}},
    ]
    policy = fleet_gated_policy(steps, count=3)
    with simulated_kubelet(cluster):
        handle = await start(temporal_client, engine, profile, policy)
        await until_progress(
            handle, lambda p: p.updated == 1 and p.running == 1 and "rest" in p.step, "a batch", within=180
        )
        with frozen(prometheus) as frozen_at:
            await until_held(handle, "batches rest", frozen_at)
            # The batch running when it froze finishes; no new one starts while the hold lasts.
            idle = await until_progress(
                handle,
                lambda p: p.running == 0 and held(p, "batches rest"),
                "the batch done, held",
                within=120,
            )
            assert (idle.phase, idle.failed) == ("Waiting", 0), idle
            assert idle.updated < idle.targeted == 4, idle
            assert "no new batch until Prometheus answers" in idle.message, idle.message
        done = await until_phase(handle, "Complete", "Halted", "RolledBack", within=180)
    assert (done.phase, done.failed, done.updated) == ("Complete", 0, 4), done


async def test_with_prometheus_frozen_approve_passes_a_held_soak_and_abort_ends_one(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    temporal_server: LocalTemporal,
    engine: str,
    prometheus: LocalPrometheus,
    exporter: GpuExporter,
) -> None:
    approved, aborted = [await gpu_profile(cluster, exporter, prometheus, 2) for _ in range(2)]
    policy = fleet_gated_policy(SOAKED, count=30)  # a soak that outlasts the test unless approved
    cli = Cli(cluster, temporal_server)
    with simulated_kubelet(cluster):
        handles = [await start(temporal_client, engine, p, policy) for p in (approved, aborted)]
        for handle in handles:
            await until_progress(handle, in_the_soak, "the soak", within=180)
        with frozen(prometheus) as frozen_at:
            # Both at once: each is timed from the freeze.
            both = await asyncio.gather(*(until_held(h, "soak watch", frozen_at) for h in handles))
            for shown in both:
                assert "`fleetwright approve <profile> rollout/watch` (or abort)" in shown.message
            name = approved.metadata.name
            assert "approved rollout/watch" in await cli.ok("approve", name, "rollout/watch")
            other = aborted.metadata.name
            assert f"aborting the rollout of {other}" in await cli.ok("abort", other, "--yes")
            ended = await asyncio.wait_for(handles[1].result(), 120)
            assert (ended.phase, ended.failed) == ("Aborted", 0), ended
            # Prometheus still frozen: the approved soak is passed and the last batch runs.
            done = await until_phase(handles[0], "Complete", "Halted", "RolledBack", within=180)
            assert (done.phase, done.failed, done.updated) == ("Complete", 0, 2), done


async def test_a_worker_stopped_mid_validation_neither_duplicates_its_job_nor_recounts(
    cluster: ClusterUnderTest, temporal_client: Client, prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    # No interrupt: only the validation cordons and drains the node.
    made = await grouped(cluster, exporter, 1, "hv", interrupt=None)
    (node,) = nodes = made.nodes
    name, profile = made.name, made.profile()
    policy = validated_policy(DIAG, check={**XID_CHECK, "count": 2})
    # The validation's pod long enough that the worker is gone well before its Job ends, however
    # loaded the machine (a Job ended first would let the first attempt finish: nothing retried to
    # prove); the stages before it as fast as elsewhere.
    timing = stage_pod_timing(0.3, ready_seconds=0.1, stages={"validate": 20})
    slow = settings(stage_pod_annotations=timing)
    with simulated_kubelet(cluster):
        async with engine_worker(cluster, temporal_client, prometheus_url=prometheus.url) as queue:
            handle = await start(temporal_client, queue, profile, policy, slow)
            running = await until(
                lambda: [j for j in validation_jobs(cluster, name, node) if j["status"].get("active")],
                180.0,
                "the validation Job running",
            )
            assert kubectl_json(cluster, "node", node)["spec"].get("unschedulable") is True
        # The worker is gone while the validation's Job runs; a new one on the same queue adopts it.
        async with engine_worker(cluster, temporal_client, prometheus_url=prometheus.url, queue=queue):
            done = await until_phase(handle, "Complete", "Halted", within=180)
    assert done.phase == "Complete", done
    jobs = validation_jobs(cluster, name, node)
    assert [j["metadata"]["name"] for j in jobs] == [running[0]["metadata"]["name"]]  # one Job, adopted
    assert jobs[0]["status"].get("succeeded") == 1
    assert await measurements(temporal_client, name, node, NAMES.RUN_VALIDATION) == 1
    attempts = await validation_attempts(temporal_client, name, node)
    assert attempts[0] >= 2, attempts  # the activity was retried, not scheduled again
    assert await measurements(temporal_client, name, node) == 2  # the checks measured once each
    assert reasons(cluster, name, nodes)[node] == NodeReason.GATE_PASSED
    assert not kubectl_json(cluster, "node", node)["spec"].get("unschedulable")


async def test_a_failing_validation_fails_the_node_keeps_it_cordoned_and_logs_show_it(
    cluster: ClusterUnderTest, temporal_client: Client, temporal_server: LocalTemporal
) -> None:
    made = await grouped(cluster, None, 1, "hx", interrupt=None)
    (node,) = nodes = made.nodes
    name, profile = made.name, made.profile()
    # The simulated kubelet fails a pod whose container names its stage in SIM_FAIL_STAGE (exit 1).
    failing = {**DIAG, "env": [{"name": "SIM_FAIL_STAGE", "value": "validate"}]}
    cli = Cli(cluster, temporal_server)
    with simulated_kubelet(cluster):
        async with engine_worker(cluster, temporal_client) as queue:
            handle = await start(temporal_client, queue, profile, validated_policy(failing))
            halted = await until_phase(handle, "Halted", "Complete", within=180)
    assert halted.phase == "Halted", halted
    message = halted.failed_reasons[node]
    assert "health gate failed" in message, message
    assert "validation dcgm-diag exited 1 (Job fw-validate-dcgm-diag-" in message, message
    assert f"last output: {STAGE_LOG[0]} | {STAGE_LOG[1]}" in message, message
    assert reasons(cluster, name, nodes)[node] == NodeReason.GATE_FAILED
    assert kubectl_json(cluster, "node", node)["spec"].get("unschedulable") is True
    (job,) = validation_jobs(cluster, name, node)
    assert job["spec"]["backoffLimit"] == 0
    # As the policy asked: privileged with the host's root at /host, and its resources.
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["securityContext"]["privileged"] is True
    assert container["volumeMounts"][0]["mountPath"] == "/host"
    assert container["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "512Mi"}}
    logs = await cli.ok("logs", name, node)  # the newest Job on the node: the validation's
    assert "==> validate dcgm-diag (Failed) pod/fw-validate-dcgm-diag-" in logs, logs
    assert "container dcgm-diag <==" in logs, logs
    assert STAGE_LOG[0] in logs
    assert "validate dcgm-diag (Failed)" in await cli.ok("logs", name, node, "--stage", "validate")


def unschedulable_taint(cluster: ClusterUnderTest, node: str) -> bool:
    """The node carries the NoSchedule taint the node lifecycle controller puts on a cordoned node:
    the scheduler places no new pod there."""
    taints = kubectl_json(cluster, "node", node)["spec"].get("taints") or []
    return any(t["key"] == "node.kubernetes.io/unschedulable" and t["effect"] == "NoSchedule" for t in taints)


async def test_a_no_interrupt_node_failing_its_gate_is_cordoned_not_drained(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str, exporter: GpuExporter
) -> None:
    made = await grouped(cluster, exporter, 1, "hc", interrupt=None)
    (node,) = nodes = made.nodes
    name, profile = made.name, made.profile()
    namespace = unique("work")
    await asyncio.to_thread(cluster.kubectl, "create", "namespace", namespace)
    job = examples.training_job("train", namespace, node, gpus=2)
    await asyncio.to_thread(cluster.kubectl, "apply", "-f", "-", input=json.dumps(job))
    (pod,) = await until(lambda: running_on(cluster, namespace), 60.0, "the training pod running")
    handle = await start(temporal_client, engine, profile, gated_policy(max_unavailable=1, initial=1))
    at_gate = NodeReason.HEALTH_GATE
    await until(lambda: reasons(cluster, name, nodes).get(node) == at_gate, 120.0, "the node at its gate")
    assert kubectl_json(cluster, "node", node)["spec"].get("unschedulable") is True
    exporter.set(node, XID_ERRORS, 79, gpu=1)
    halted = await until_phase(handle, "Halted", "Complete", within=120)
    assert halted.phase == "Halted", halted
    assert "gpu-xid-errors Failed" in halted.failed_reasons[node], halted.failed_reasons
    assert reasons(cluster, name, nodes)[node] == NodeReason.GATE_FAILED
    # Out of service: cordoned, so no new pod is scheduled there ...
    assert kubectl_json(cluster, "node", node)["spec"].get("unschedulable") is True
    await until(lambda: unschedulable_taint(cluster, node), 60.0, "the node's unschedulable taint")
    # ... but not drained: its workload's pod kept running throughout.
    assert running_on(cluster, namespace) == {pod: node}
    history = await temporal_client.get_workflow_handle(node_workflow_id(name, node)).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert NAMES.CORDON in scheduled, scheduled
    assert NAMES.DRAIN not in scheduled, scheduled


XID_VALUE = {
    "name": "gpu-xid-value",
    "query": f'max({XID_ERRORS}{{Hostname="{{{{node}}}}"}})',
    "successCondition": "result[0] == 0",
    "failureCondition": "result[0] > 0",
    "count": 3,
    "intervalSeconds": 2,
}


def value_gated_policy() -> DeploymentPolicy:
    """Batches of 2 under rollback, gated on the last XID's value: a faulty GPU keeps failing it."""
    base = gated_policy(action="rollback")
    spec = base.spec.model_dump(by_alias=True, exclude_none=True)
    spec |= {"healthChecks": [XID_VALUE], "nodeGate": {"checks": [XID_VALUE["name"]]}}
    return base.model_copy(update={"spec": type(base.spec).model_validate(spec)})


def cordoned(cluster: ClusterUnderTest, node: str) -> bool:
    return bool(kubectl_json(cluster, "node", node)["spec"].get("unschedulable"))


async def xid_79_under_rollback(
    cluster: ClusterUnderTest,
    client: Client,
    queue: str,
    exporter: GpuExporter,
    engine: EngineSettings | None = None,
) -> tuple[str, list[str], str, WorkflowHandle[RolloutWorkflow, Progress]]:
    """Two GPU nodes at 1.0.0, then 1.1.0 under ``value_gated_policy``, the first node at its gate
    given XID 79: the profile's name, its nodes, the faulty one and the rollout (rolling back)."""
    group, nodes = await asyncio.to_thread(gpu_group, cluster, exporter, 2)
    name = unique("hq")
    v1 = examples.profile(name, selector={GROUP_LABEL: group}, interrupt=None, generation=1)
    v2 = examples.profile(name, selector={GROUP_LABEL: group}, interrupt=None, version="1.1.0", generation=2)
    policy = value_gated_policy()
    handle = await start(client, queue, v1, policy, engine)
    first = await until_phase(handle, "Complete", "Halted", within=300)
    assert first.phase == "Complete", first
    bad = await xid_at_the_gate(cluster, handle, SpecChange(profile=v2, policy=policy), nodes, exporter)
    return name, nodes, bad, handle


async def test_an_xid_79_node_stays_quarantined_after_the_rollback_until_released(
    cluster: ClusterUnderTest,
    temporal_client: Client,
    temporal_server: LocalTemporal,
    engine: str,
    exporter: GpuExporter,
) -> None:
    name, nodes, bad, handle = await xid_79_under_rollback(cluster, temporal_client, engine, exporter)
    (good,) = [n for n in nodes if n != bad]
    done = await until_phase(handle, "RolledBack", "Halted", within=300)
    # The rollback returned both nodes; the faulty one failed its gate again on 1.0.0 and is held.
    assert done.phase == "RolledBack", done
    assert f"hardware suspect, kept cordoned: {bad}" in done.message, done.message
    for node in nodes:
        annotations = kubectl_json(cluster, "node", node)["metadata"].get("annotations", {})
        assert read_profile_state(annotations, name).packages["tuning"].version == "1.0.0", node
    assert reasons(cluster, name, nodes)[bad] == NodeReason.HARDWARE_SUSPECT
    assert cordoned(cluster, bad)
    assert not cordoned(cluster, good)
    assert await measurements(temporal_client, name, bad) >= 1  # re-gated on the returned version
    # Its node workflow waits to re-gate it in quarantine.
    suspect = temporal_client.get_workflow_handle(node_workflow_id(name, bad), result_type=NodeResult)

    async def quarantined() -> bool:
        return str(await suspect.query(NodeWorkflow.stage)) == "quarantine"

    await until(quarantined, 60.0, "the node workflow in quarantine")
    # A human who knows better puts it back into service.
    cli = Cli(cluster, temporal_server)
    refused = await cli.fails("release", name, good)
    assert "has not failed in this rollout" in refused, refused
    assert f"releasing {bad}" in await cli.ok("release", name, bad)
    await until(lambda: not cordoned(cluster, bad), 60.0, "the released node uncordoned")
    assert reasons(cluster, name, nodes)[bad] == NodeReason.RELEASED
    ended = await asyncio.wait_for(suspect.result(), 60)  # the release ended its quarantine
    assert ended.status is RunStatus.FAILED, ended


async def test_an_xid_79_node_in_quarantine_returns_to_service_once_its_series_is_clean(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str, exporter: GpuExporter
) -> None:
    # The quarantine's first pause at 5 s instead of 300: its runs come within the test.
    quick = settings(quarantine_regate_seconds=5)
    name, nodes, bad, handle = await xid_79_under_rollback(cluster, temporal_client, engine, exporter, quick)
    done = await until_phase(handle, "RolledBack", "Halted", within=300)
    assert done.phase == "RolledBack", done
    assert reasons(cluster, name, nodes)[bad] == NodeReason.HARDWARE_SUSPECT

    def message() -> str:
        return str(condition(cluster, name, bad).get("message", ""))

    # The XID is still there: the first run in quarantine fails, and the node stays out.
    await until(
        lambda: "health gate run 1 in quarantine" in message() and "health gate failed" in message(),
        120.0,
        "the first run in quarantine failed",
        details=message,
    )
    assert reasons(cluster, name, nodes)[bad] == NodeReason.HARDWARE_SUSPECT
    assert cordoned(cluster, bad)
    exporter.set(bad, XID_ERRORS, 0, gpu=1)  # the fault cleared (the GPU was reseated)
    await until(
        lambda: reasons(cluster, name, nodes)[bad] == NodeReason.GATE_PASSED,
        180.0,
        "back in service without a release",
        details=message,
    )
    assert not cordoned(cluster, bad)
    assert "in quarantine passed" in message(), message()
    suspect = temporal_client.get_workflow_handle(node_workflow_id(name, bad), result_type=NodeResult)
    passed = await asyncio.wait_for(suspect.result(), 60)
    assert passed.status is RunStatus.SUCCEEDED, passed
