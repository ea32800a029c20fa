"""The node gate on the workflow tier: after its last stage a node stays cordoned while its checks
measure (one activity per measurement, recorded once), passes and goes back into service, fails
naming the check and its value (the failure policy applies), waits named while Inconclusive until
approved, holds named MonitoringUnavailable while Prometheus does not answer (measuring on until
an answer lifts the hold), and resumes after a worker restart without re-counting a measurement.
A node whose change needs no interrupt is cordoned for its gate, never drained, and keeps the
cordon when it fails or waits. Prometheus is faked behind the activity; the real one is the
integration tier's."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from fleetwright.activities.payloads import NAMES
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.keys import NodeReason
from fleetwright.errors import PrometheusUnavailableError
from fleetwright.local import examples
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.node import NodeWorkflow
from fleetwright.workflows.payloads import NodeResult, SpecChange
from fleetwright.workflows.quarantine import pause_before
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import SETTINGS, in_phase, node_activities, rollout_input, running, start, unique
from tests.support.waiting import query_progress, until, until_fleet, until_grown, until_progress
from tests.workflow.fakefleet import FLEET_XID, FakeFleet, Outage, answer, xid_from_the_second

pytestmark = pytest.mark.workflow

XID = {
    "name": "xid",
    "query": 'changes(DCGM_FI_DEV_XID_ERRORS{Hostname="{{node}}"}[5m])',
    "successCondition": "all(r == 0 for r in result)",
    "failureCondition": "any(r > 0 for r in result)",
    "count": 2,
    "intervalSeconds": 1,
}


def gated(
    check: dict[str, Any] | None = None,
    *,
    action: str = "halt",
    max_unavailable: int = 2,
    steps: list[dict[str, Any]] | None = None,
) -> DeploymentPolicy:
    deployment = examples.policy(max_unavailable=max_unavailable, steps=steps)
    spec = deployment.spec.model_dump(by_alias=True)
    spec["healthChecks"] = [check or XID]
    spec["nodeGate"] = {"checks": [(check or XID)["name"]]}
    spec["failure"] = {"maxFailedNodes": 0, "action": action}
    return deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec)})


async def test_a_healthy_node_is_measured_cordoned_then_goes_back_into_service(client: Client) -> None:
    fleet = FakeFleet(size=3)
    name = unique()
    async with running(client, fleet, rollout_input(gated(), name=name)) as handle:
        done = await in_phase(handle, "Complete")
    assert done.updated == 3
    # Every measurement ran with the node cordoned, count of them per node.
    assert sorted(fleet.measured) == sorted((n, "xid", True) for n in fleet.nodes for _ in range(2))
    assert not fleet.cordoned()
    assert set(fleet.reasons.values()) == {NodeReason.GATE_PASSED}
    activities = await node_activities(client, name, "gpu-node-0000")
    assert activities == [
        NAMES.CORDON,
        NAMES.DRAIN,
        NAMES.RUN_STAGES,
        NAMES.MEASURE,
        NAMES.MEASURE,
        NAMES.UNCORDON,
    ]
    # The query's placeholder was the node's own name.
    assert all(
        shown[2] in (NodeReason.HEALTH_GATE, NodeReason.UPDATING, NodeReason.GATE_PASSED)
        for shown in fleet.shown
    )


async def test_an_xid_during_the_gate_fails_the_node_naming_check_and_value(client: Client) -> None:
    fleet = FakeFleet(size=4)
    bad = "gpu-node-0001"
    seen: dict[str, int] = {}

    def metric(node: str, promql: str) -> Any:
        assert f'Hostname="{node}"' in promql
        seen[node] = seen.get(node, 0) + 1
        return answer(0, 3) if node == bad and seen[node] == 2 else answer(0, 0)

    fleet.metric = metric
    name = unique()
    async with running(client, fleet, rollout_input(gated(max_unavailable=1), name=name)) as handle:
        halted = await in_phase(handle, "Halted")
    message = halted.failed_reasons[bad]
    assert "health gate failed" in message, message
    assert "xid Failed (2/2, last Failed [0, 3])" in message, message
    assert "any(r > 0 for r in result) holds" in message
    assert fleet.reasons[bad] == NodeReason.GATE_FAILED
    assert bad in fleet.cordoned()  # a node that failed its gate stays out of service


async def test_a_gate_failure_with_rollback_rolls_the_batch_back(client: Client) -> None:
    fleet = FakeFleet(size=4)
    bad = "gpu-node-0002"
    fleet.metric = lambda node, promql: answer(5) if node == bad else answer(0)
    name = unique()
    policy = gated({**XID, "count": 1}, action="rollback", max_unavailable=2)
    async with running(client, fleet, rollout_input(policy, name=name)) as handle:
        done = await in_phase(handle, "RolledBack")
    assert done.rolled_back_generation is not None
    returned = {r.node for r in fleet.stage_requests if r.stage.value == "uninstall"}
    measured = {node for node, _, _ in fleet.measured}
    assert bad in measured
    assert returned == measured, (returned, measured)  # the nodes it changed, and only those
    # Returned, the failed node ran its gate again, failed it again and stays out of service; the
    # rollback does not count it against itself: it returned every other node.
    assert [n for n, _, _ in fleet.measured].count(bad) == 2
    assert fleet.cordoned() == {bad}
    assert fleet.reasons[bad] == NodeReason.HARDWARE_SUSPECT
    assert fleet.statuses[bad] == "Failed"
    assert "hardware suspect: health gate failed" in fleet.messages[bad], fleet.messages[bad]
    assert f"fleetwright release {name} {bad}" in fleet.messages[bad]
    assert f"hardware suspect, kept cordoned: {bad}" in done.message, done.message
    assert done.failed_nodes == (bad,)


async def test_no_data_waits_named_until_a_human_approves(client: Client) -> None:
    fleet = FakeFleet(size=2)
    fleet.metric = lambda node, promql: answer() if node == "gpu-node-0000" else answer(0)
    name = unique()
    async with running(
        client, fleet, rollout_input(gated({**XID, "count": 1}, max_unavailable=1), name=name)
    ) as handle:
        node = client.get_workflow_handle(node_workflow_id(name, "gpu-node-0000"))
        await until_fleet(
            lambda: fleet.reasons.get("gpu-node-0000") == NodeReason.GATE_INCONCLUSIVE,
            "the inconclusive gate",
        )
        measured = len(fleet.measured)
        await asyncio.sleep(1.5)
        assert fleet.statuses["gpu-node-0000"] == "Blocked"
        assert "gpu-node-0000" in fleet.cordoned()
        assert len(fleet.measured) == measured  # it holds the budget: nothing else starts
        assert await node.query(NodeWorkflow.stage) == "health-gate-inconclusive"
        assert "approve" in fleet.messages["gpu-node-0000"]
        assert "gate/gpu-node-0000" in fleet.messages["gpu-node-0000"]
        answer_text = await node.execute_update(NodeWorkflow.approve_gate)
        assert "approved" in answer_text
        done = await in_phase(handle, "Complete")
    assert done.updated == 2
    assert fleet.reasons["gpu-node-0000"] == NodeReason.GATE_PASSED
    assert not fleet.cordoned()


async def test_an_unreachable_prometheus_holds_the_node_named_then_it_completes_by_itself(
    client: Client,
) -> None:
    fleet = FakeFleet(size=1)
    node = "gpu-node-0000"
    outage = Outage()
    fleet.metric = outage
    name = unique()
    # count 2 and the limit 2 Errors in a row: Errors do not use up count, the third holds.
    check = {**XID, "count": 2, "consecutiveErrorLimit": 2}
    async with running(
        client, fleet, rollout_input(gated(check, action="rollback", max_unavailable=1), name=name)
    ) as handle:
        await until_fleet(
            lambda: fleet.reasons.get(node) == NodeReason.MONITORING_UNAVAILABLE,
            "the node held MonitoringUnavailable",
            details=lambda: (fleet.reasons, fleet.messages),
        )
        await until(lambda: fleet.statuses[node] == "Blocked", 30.0, "the node held", blocking=False)
        assert node in fleet.cordoned()
        # Named from the first Error (still InProgress, nothing to approve), held (Blocked) once
        # its Errors passed the limit: one status per Error up to then.
        named = [
            (note.phase, note.message)
            for who, note in fleet.notes
            if who == node and note.reason == NodeReason.MONITORING_UNAVAILABLE
        ]
        counts = ["1 Error in a row, held after 3", "2 Errors in a row, held after 3", "held: 3 or more"]
        assert [phase for phase, _ in named] == ["InProgress", "InProgress", "Blocked"], named
        for (_, message), count in zip(named, counts, strict=True):
            assert f"health gate MonitoringUnavailable: xid MonitoringUnavailable ({count}" in message
            assert "0/2 counted): PrometheusUnavailable" in message, message
        assert f"gate/{node}" not in named[0][1]
        message = fleet.messages[node]
        assert f"gate/{node}" in message, message
        workflow = client.get_workflow_handle(node_workflow_id(name, node))
        assert await workflow.query(NodeWorkflow.stage) == "health-gate-monitoring-unavailable"
        progress = await query_progress(handle)
        assert progress is not None
        assert progress.failed == 0
        # Held, it keeps measuring at the interval: more Errors, and still nothing fails.
        await until_grown(fleet.measured, 2, "measurements while held")
        assert fleet.reasons[node] == NodeReason.MONITORING_UNAVAILABLE
        outage.down = False  # Prometheus answers again: no human needed
        done = await in_phase(handle, "Complete")
    assert (done.updated, done.failed) == (1, 0)
    assert done.rolled_back_generation is None  # the failure action never fired
    assert fleet.reasons[node] == NodeReason.GATE_PASSED
    assert "xid Successful (2/2, last Successful [0])" in fleet.messages[node]
    assert not fleet.cordoned()
    assert not [r for r in fleet.stage_requests if r.stage.value == "uninstall"]


async def test_a_failed_measurement_while_held_still_fails_the_node(client: Client) -> None:
    fleet = FakeFleet(size=1)
    answers = iter([None, None, answer(7)])

    def metric(node: str, promql: str) -> Any:
        got = next(answers)
        if got is None:
            raise PrometheusUnavailableError("Prometheus at http://127.0.0.1:1 unreachable: MaxRetryError")
        return got

    fleet.metric = metric
    name = unique()
    check = {**XID, "count": 3, "consecutiveErrorLimit": 1}
    async with running(client, fleet, rollout_input(gated(check, max_unavailable=1), name=name)) as handle:
        halted = await in_phase(handle, "Halted")
    message = halted.failed_reasons["gpu-node-0000"]
    assert "health gate failed" in message, message
    assert "xid Failed (1/3, last Failed [7])" in message, message
    assert fleet.reasons["gpu-node-0000"] == NodeReason.GATE_FAILED


async def test_approving_a_node_held_for_monitoring_passes_it(client: Client) -> None:
    fleet = FakeFleet(size=1)
    fleet.metric = Outage()  # for good
    name = unique()
    check = {**XID, "count": 2, "consecutiveErrorLimit": 0}
    async with running(client, fleet, rollout_input(gated(check, max_unavailable=1), name=name)) as handle:
        await until_fleet(
            lambda: fleet.reasons.get("gpu-node-0000") == NodeReason.MONITORING_UNAVAILABLE,
            "the node held MonitoringUnavailable",
        )
        node = client.get_workflow_handle(node_workflow_id(name, "gpu-node-0000"))
        assert "approved" in await node.execute_update(NodeWorkflow.approve_gate)
        done = await in_phase(handle, "Complete")
    assert (done.updated, done.failed) == (1, 0)
    assert fleet.reasons["gpu-node-0000"] == NodeReason.GATE_PASSED
    assert "approved by a human" in fleet.messages["gpu-node-0000"]


async def test_a_worker_killed_mid_gate_resumes_without_recounting(client: Client) -> None:
    fleet = FakeFleet(size=1)
    fleet.hold_measurements = asyncio.Event()
    name = unique()
    check = {**XID, "count": 3}
    handle, queue = await start(client, fleet, rollout_input(gated(check, max_unavailable=1), name=name))
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until_fleet(lambda: fleet.reasons.get("gpu-node-0000") == NodeReason.HEALTH_GATE, "the gate")
        fleet.hold_measurements.set()
        await until_fleet(lambda: len(fleet.measured) >= 2, "two measurements")
        fleet.hold_measurements.clear()
    # The worker is gone while the third measurement is held; a new one finishes the gate.
    fleet.hold_measurements.set()
    async with build_worker(client, fleet.activities(), task_queue=queue):
        done = await in_phase(handle, "Complete")
        await handle.terminate("test done")
    assert done.updated == 1
    history = await client.get_workflow_handle(node_workflow_id(name, "gpu-node-0000")).fetch_history()
    completed = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == NAMES.MEASURE
    ]
    assert len(completed) == 3  # each measurement recorded once, none counted twice


async def test_the_limits_tolerate_what_they_allow_after_the_initial_delay(client: Client) -> None:
    fleet = FakeFleet(size=1)
    answers = iter([answer(), answer(4), answer(0), answer(0)])  # no data, an XID, then clean
    fleet.metric = lambda node, promql: next(answers)
    name = unique()
    check = {**XID, "count": 4, "initialDelaySeconds": 1, "failureLimit": 1, "inconclusiveLimit": 1}
    async with running(client, fleet, rollout_input(gated(check, max_unavailable=1), name=name)) as handle:
        done = await in_phase(handle, "Complete")
    assert done.updated == 1
    assert len(fleet.measured) == 4
    assert "xid Successful (4/4, last Successful [0])" in fleet.messages["gpu-node-0000"]


def with_external(validator: dict[str, Any], checks: bool = False) -> DeploymentPolicy:
    deployment = gated({**XID, "count": 1}) if checks else examples.policy(max_unavailable=1)
    spec = deployment.spec.model_dump(by_alias=True, exclude_none=True)
    spec["nodeGate"] = {**(spec.get("nodeGate") or {}), "external": [validator]}
    return deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec)})


async def test_an_external_validator_holds_the_node_until_its_verdict(client: Client) -> None:
    fleet = FakeFleet(size=1)
    node = "gpu-node-0000"
    name = unique()
    validator = {
        "name": "burn-in",
        "annotation": "example.com/burn-in",
        "annotationValue": "ok",
        "timeoutSeconds": 60,
    }
    async with running(
        client, fleet, rollout_input(with_external(validator, checks=True), name=name)
    ) as handle:
        await until_fleet(lambda: fleet.measured != [], "the gate")
        await asyncio.sleep(1)
        assert node in fleet.cordoned()  # the check passed; the verdict has not come
        fleet.annotations(node)["example.com/burn-in"] = "ok"
        done = await in_phase(handle, "Complete")
    assert done.updated == 1
    assert "example.com/burn-in" not in fleet.annotations(node)  # a verdict counts once
    assert "burn-in passed: annotation example.com/burn-in=ok" in fleet.messages[node]
    assert not fleet.cordoned()


async def test_a_condition_verdict_against_the_node_fails_it_and_none_times_out(client: Client) -> None:
    fleet = FakeFleet(size=2)
    name = unique()
    # A fault condition: False passes, True (the fault) fails.
    validator = {
        "name": "nvsentinel",
        "conditionType": "GpuFault",
        "conditionStatus": "False",
        "timeoutSeconds": 10,
    }
    async with running(client, fleet, rollout_input(with_external(validator), name=name)) as handle:
        first = await until_fleet(lambda: sorted(fleet.cordoned()), "a node at its gate")
        held = first[0]
        later = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        fleet.nodes[held]["status"].setdefault("conditions", []).append(
            {"type": "GpuFault", "status": "True", "lastTransitionTime": later, "message": "XID 79"}
        )
        halted = await in_phase(handle, "Halted")
    assert "nvsentinel failed: condition GpuFault=True (XID 79)" in halted.failed_reasons[held]
    assert held in fleet.cordoned()


def soaked(check: dict[str, Any], *, action: str = "halt") -> DeploymentPolicy:
    """Canary 1, a soak measuring ``check`` over the updated nodes, then batches of 2."""
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 1, "checks": [check["name"]]}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
    ]
    deployment = examples.policy(max_unavailable=2, steps=steps)
    spec = deployment.spec.model_dump(by_alias=True, exclude_none=True)
    spec |= {"healthChecks": [check], "failure": {"maxFailedNodes": 0, "action": action}}
    return deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec)})


async def test_a_fleet_gate_failure_during_the_soak_stops_the_next_batch(client: Client) -> None:
    fleet = FakeFleet(size=5)
    seen: list[str] = []
    fleet.metric = xid_from_the_second(seen)
    name = unique()
    async with running(client, fleet, rollout_input(soaked(FLEET_XID), name=name)) as handle:
        halted = await in_phase(handle, "Halted")
        await asyncio.sleep(1)
    assert "soak watch: fleet gate failed: fleet-xid Failed (2/3, last Failed [2])" in halted.message
    started = {r.node for r in fleet.stage_requests}
    assert len(started) == 1  # the canary only: no batch started
    (canary,) = started
    assert f'Hostname=~"{canary}"' in seen[0]  # {{nodes}}: the nodes updated so far
    assert [m.phase.value for m in fleet.fleet_measured] == ["Successful", "Failed"]


async def test_a_passing_fleet_gate_ends_the_soak_and_an_inconclusive_one_waits_for_approval(
    client: Client,
) -> None:
    fleet = FakeFleet(size=3)
    answers = iter([answer(0), answer()])  # then no data: Inconclusive
    fleet.metric = lambda node, promql: next(answers, answer(0))
    name = unique()
    async with running(client, fleet, rollout_input(soaked({**FLEET_XID, "count": 2}), name=name)) as handle:
        waiting = await until_progress(handle, lambda p: "fleet gate inconclusive" in p.message, "the wait")
        assert "fleetwright approve <profile> rollout/watch" in waiting.message
        assert len({r.node for r in fleet.stage_requests}) == 1
        await handle.execute_update(RolloutWorkflow.approve, "rollout/watch")
        done = await in_phase(handle, "Complete")
    assert done.updated == 3
    assert [m.phase.value for m in fleet.fleet_measured] == ["Successful", "Inconclusive"]


async def test_a_soak_whose_prometheus_does_not_answer_holds_named_then_completes_by_itself(
    client: Client,
) -> None:
    fleet = FakeFleet(size=3)
    outage = Outage("answered 503")
    fleet.metric = outage
    name = unique()
    check = {**FLEET_XID, "count": 2, "consecutiveErrorLimit": 1}
    async with running(client, fleet, rollout_input(soaked(check, action="rollback"), name=name)) as handle:
        named = await until_progress(
            handle, lambda p: "fleet gate MonitoringUnavailable" in p.message, "the soak named"
        )
        # Named from the first Error, with the count of Errors in a row and when it holds.
        first = "fleet-xid MonitoringUnavailable (1 Error in a row, held after 2; 0/2 counted): "
        assert first in named.message, named.message
        assert "answered 503" in named.message, named.message
        held = await until_progress(
            handle, lambda p: "waiting for Prometheus to answer" in p.message, "the soak held"
        )
        assert "fleet-xid MonitoringUnavailable (held: 2 or more Errors in a row" in held.message
        assert held.phase not in ("Halted", "RollingBack")
        assert held.failed == 0
        await until_grown(fleet.fleet_measured, 2, "measurements while held")
        still = await query_progress(handle)
        assert still is not None
        assert "fleet gate MonitoringUnavailable" in still.message
        assert len({r.node for r in fleet.stage_requests}) == 1  # held: the canary only
        outage.down = False  # Prometheus answers again: no human needed
        done = await in_phase(handle, "Complete")
    assert (done.updated, done.failed) == (3, 0)
    assert done.rolled_back_generation is None  # the failure action never fired
    phases = [m.phase.value for m in fleet.fleet_measured]
    assert phases[-2:] == ["Successful", "Successful"], phases
    assert set(phases[:-2]) == {"Error"}, phases


DIAG = {"name": "dcgm-diag", "image": "ghcr.io/example/gpu-health:1.0.0", "args": ["diag", "-r", "2"]}
NCCL = {"name": "nccl-allreduce", "image": "ghcr.io/example/nccl-tests:2.13", "timeoutSeconds": 600}


def validating(
    *validations: dict[str, Any],
    check: dict[str, Any] | None = None,
    action: str = "halt",
    max_unavailable: int = 1,
) -> DeploymentPolicy:
    """A node gate running ``validations`` (then ``check``, when given)."""
    deployment = gated(check, action=action, max_unavailable=max_unavailable)
    spec = deployment.spec.model_dump(by_alias=True, exclude_none=True)
    gate: dict[str, Any] = {"validations": list(validations)}
    if check is not None:
        gate["checks"] = [check["name"]]
    else:
        spec.pop("healthChecks", None)
    spec["nodeGate"] = gate
    return deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec)})


async def test_validations_run_cordoned_and_drained_then_the_checks_then_service(client: Client) -> None:
    fleet = FakeFleet(size=2)
    name = unique()
    # No interrupt: only the validations make the node cordoned and drained.
    policy = validating(DIAG, NCCL, check={**XID, "count": 1})
    async with running(client, fleet, rollout_input(policy, name=name, interrupt=None)) as handle:
        done = await in_phase(handle, "Complete")
    assert done.updated == 2
    for node in fleet.nodes:  # in order, each with the node cordoned
        ran = [(v, cordoned) for n, v, _, cordoned in fleet.validated if n == node]
        assert ran == [("dcgm-diag", True), ("nccl-allreduce", True)], (node, ran)
    assert sorted(fleet.drained) == sorted(fleet.nodes)
    assert not fleet.cordoned()
    activities = await node_activities(client, name, "gpu-node-0000")
    assert activities == [
        NAMES.CORDON,
        NAMES.DRAIN,
        NAMES.RUN_STAGES,
        NAMES.RUN_VALIDATION,
        NAMES.RUN_VALIDATION,
        NAMES.MEASURE,
        NAMES.UNCORDON,
    ]
    message = fleet.messages["gpu-node-0000"]
    assert "validation dcgm-diag passed; validation nccl-allreduce passed; xid Successful" in message
    assert fleet.reasons["gpu-node-0000"] == NodeReason.GATE_PASSED


async def test_a_failing_validation_fails_the_node_naming_it_and_keeps_it_cordoned(client: Client) -> None:
    fleet = FakeFleet(size=2)
    bad = "gpu-node-0000"
    shown: list[str] = []

    def exit_of(request: Any) -> tuple[int, str]:
        shown.append(fleet.messages[request.node])
        failing = request.node == bad and request.validation.name == "dcgm-diag"
        return (226, "Diagnostic  | Result\nMemory | Fail: GPU 1 row remap\n") if failing else (0, "ok")

    fleet.validation_exit = exit_of
    name = unique()
    policy = validating(DIAG, NCCL, check={**XID, "count": 1})
    plain = rollout_input(policy, name=name)
    # Runtime-required: the taint keeps workloads off until the gate passed.
    required = plain.profile.spec.model_copy(update={"runtime_required": True})
    runtime = plain.model_copy(update={"profile": plain.profile.model_copy(update={"spec": required})})
    async with running(client, fleet, runtime) as handle:
        halted = await in_phase(handle, "Halted")
    message = halted.failed_reasons[bad]
    assert "health gate failed" in message, message
    assert "validation dcgm-diag exited 226 (Job fw-validate-dcgm-diag-" in message, message
    assert "last output: Diagnostic  | Result | Memory | Fail: GPU 1 row remap" in message, message
    assert "nccl-allreduce waiting" in message, message  # the first failure ends the gate
    assert fleet.reasons[bad] == NodeReason.GATE_FAILED
    assert bad in fleet.cordoned()
    assert fleet.untainted == ["gpu-node-0001"]  # the taint is released only once the gate passed
    assert [v for node, v, _, _ in fleet.validated if node == bad] == ["dcgm-diag"]
    assert not [m for m in fleet.measured if m[0] == bad]  # no check measured
    assert "running validation dcgm-diag (1/2)" in shown[0]  # the status named it while it ran


async def test_a_failing_validation_with_rollback_rolls_the_batch_back(client: Client) -> None:
    fleet = FakeFleet(size=4)
    fleet.validation_exit = lambda request: (
        (1, "NCCL: bus bandwidth 12 GB/s") if request.node == "gpu-node-0002" else (0, "")
    )
    name = unique()
    async with running(
        client, fleet, rollout_input(validating(NCCL, action="rollback", max_unavailable=2), name=name)
    ) as handle:
        done = await in_phase(handle, "RolledBack")
    assert done.rolled_back_generation is not None
    validated = {node for node, _, _, _ in fleet.validated}
    returned = {r.node for r in fleet.stage_requests if r.stage.value == "uninstall"}
    assert "gpu-node-0002" in validated
    assert returned == validated, (returned, validated)
    # A node being returned runs no validation, but the one that failed its gate runs it again.
    runs = [node for node, _, _, _ in fleet.validated]
    assert sorted(runs) == sorted([*validated, "gpu-node-0002"]), runs
    assert fleet.cordoned() == {"gpu-node-0002"}
    assert fleet.reasons["gpu-node-0002"] == NodeReason.HARDWARE_SUSPECT


async def test_a_worker_killed_mid_validation_adopts_its_job(client: Client) -> None:
    fleet = FakeFleet(size=1)
    fleet.hold_validations = asyncio.Event()
    name = unique()
    handle, queue = await start(
        client, fleet, rollout_input(validating(DIAG, check={**XID, "count": 2}), name=name)
    )
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until_fleet(lambda: fleet.validated, "the validation")
    # The worker is gone while the validation's Job runs; a new one retries the activity.
    fleet.hold_validations.set()
    async with build_worker(client, fleet.activities(), task_queue=queue):
        done = await in_phase(handle, "Complete")
        await handle.terminate("test done")
    assert done.updated == 1
    assert [attempt for _, _, attempt, _ in fleet.validated] == [1, 2]  # retried ...
    assert list(fleet.validation_jobs.values()) == [1]  # ... adopting the one Job, never a second
    assert len(fleet.measured) == 2


async def test_an_abort_during_a_validation_ends_the_gate_and_keeps_the_node_cordoned(client: Client) -> None:
    fleet = FakeFleet(size=1)
    fleet.hold_validations = asyncio.Event()
    node = "gpu-node-0000"
    name = unique()
    async with running(client, fleet, rollout_input(validating(DIAG, NCCL), name=name)) as handle:
        await until_fleet(lambda: fleet.validated, "the validation")
        await handle.signal(RolloutWorkflow.abort)
        result = await handle.result()  # the aborted rollout ends once its node did
    assert result.phase == "Aborted", result
    assert fleet.reasons[node] == NodeReason.GATE_FAILED
    assert "aborted during validation dcgm-diag" in fleet.messages[node], fleet.messages[node]
    assert fleet.statuses[node] == "Failed"
    assert node in fleet.cordoned()  # its health was never shown
    assert [v for _, v, _, _ in fleet.validated] == ["dcgm-diag"]  # no later validation started


async def test_a_no_interrupt_change_is_cordoned_for_its_gate_never_drained(client: Client) -> None:
    fleet = FakeFleet(size=2)
    name = unique()
    async with running(
        client, fleet, rollout_input(gated({**XID, "count": 2}), name=name, interrupt=None)
    ) as handle:
        done = await in_phase(handle, "Complete")
    assert done.updated == 2
    # Its stages ran in service; every measurement with the node cordoned; its pods never drained.
    assert {cordoned for _, _, cordoned in fleet.cordoned_at_stages} == {False}
    assert sorted(fleet.measured) == sorted((n, "xid", True) for n in fleet.nodes for _ in range(2))
    assert fleet.drained == []
    assert not fleet.cordoned()
    assert sorted(fleet.uncordoned) == sorted(fleet.nodes)
    activities = await node_activities(client, name, "gpu-node-0000")
    assert activities == [NAMES.RUN_STAGES, NAMES.CORDON, NAMES.MEASURE, NAMES.MEASURE, NAMES.UNCORDON]
    assert set(fleet.reasons.values()) == {NodeReason.GATE_PASSED}


async def test_a_no_interrupt_node_failing_or_waiting_at_its_gate_keeps_the_cordon(client: Client) -> None:
    fleet = FakeFleet(size=3)
    bad, unsure, good = "gpu-node-0000", "gpu-node-0001", "gpu-node-0002"
    answers = {bad: answer(3), unsure: answer()}  # an XID; no data
    fleet.metric = lambda node, promql: answers.get(node, answer(0))
    name = unique()
    one_batch = [{"name": "all", "batches": {"strategy": "fixed", "initial": 3}}]
    policy = gated({**XID, "count": 1}, max_unavailable=3, steps=one_batch)
    async with running(client, fleet, rollout_input(policy, name=name, interrupt=None)) as handle:
        await until_fleet(
            lambda: (
                fleet.reasons.get(bad) == NodeReason.GATE_FAILED
                and fleet.reasons.get(unsure) == NodeReason.GATE_INCONCLUSIVE
                and good in fleet.uncordoned
            ),
            "one node failed, one inconclusive and one back in service",
        )
        assert fleet.cordoned() == {bad, unsure}
        assert fleet.statuses[bad] == "Failed"
        halted = await until_progress(handle, lambda p: p.failed_nodes != (), "the failure counted")
    assert fleet.drained == []
    assert bad not in fleet.uncordoned
    assert unsure not in fleet.uncordoned
    assert halted.failed_nodes == (bad,), halted


def rollback_in_one_batch() -> DeploymentPolicy:
    """Two nodes in one batch, one XID measurement each, a failure rolls back."""
    one_batch = [{"name": "all", "batches": {"strategy": "fixed", "initial": 2}}]
    return gated({**XID, "count": 1}, action="rollback", max_unavailable=2, steps=one_batch)


async def test_a_gate_failed_node_returned_by_a_rollback_goes_back_into_service_once_its_gate_passes(
    client: Client,
) -> None:
    fleet = FakeFleet(size=2)
    bad = "gpu-node-0001"
    seen: list[str] = []

    def metric(node: str, promql: str) -> Any:
        seen.append(node)
        return answer(5) if node == bad and seen.count(bad) == 1 else answer(0)  # the fault cleared

    fleet.metric = metric
    name = unique()
    async with running(
        client, fleet, rollout_input(rollback_in_one_batch(), name=name, interrupt=None)
    ) as handle:
        done = await in_phase(handle, "RolledBack")
    assert seen.count(bad) == 2  # its gate, then its gate again on the returned version
    assert not fleet.cordoned()
    assert fleet.reasons[bad] == NodeReason.GATE_PASSED
    assert fleet.drained == []  # no interrupt: cordoned for each gate, never drained
    activities = await node_activities(client, name, bad)
    assert activities == [NAMES.RUN_STAGES, NAMES.CORDON, NAMES.MEASURE, NAMES.UNCORDON]
    assert "hardware suspect" not in done.message


async def test_a_hardware_suspect_node_stays_out_until_a_human_releases_it(client: Client) -> None:
    fleet = FakeFleet(size=2)
    bad = "gpu-node-0000"
    fleet.metric = lambda node, promql: answer(5) if node == bad else answer(0)
    name = unique()
    async with running(
        client, fleet, rollout_input(rollback_in_one_batch(), name=name, interrupt=None)
    ) as handle:
        done = await in_phase(handle, "RolledBack")
        assert fleet.cordoned() == {bad}
        assert fleet.reasons[bad] == NodeReason.HARDWARE_SUSPECT
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(RolloutWorkflow.release_node, "gpu-node-0001")
        assert "has not failed in this rollout" in str(refused.value.cause)
        node = client.get_workflow_handle(node_workflow_id(name, bad), result_type=NodeResult)
        assert await node.query(NodeWorkflow.stage) == "quarantine"  # waiting to re-gate it
        measured = len(fleet.measured)
        answered = await handle.execute_update(RolloutWorkflow.release_node, bad)
        assert f"releasing {bad}" in answered
        await until_fleet(lambda: not fleet.cordoned(), "the released node uncordoned")
        ended = await asyncio.wait_for(node.result(), 30)  # the release ended its quarantine
        await handle.terminate("test done")
    assert ended.status is RunStatus.FAILED
    assert len(fleet.measured) == measured  # no gate ran again after the release
    assert fleet.reasons[bad] == NodeReason.RELEASED
    assert fleet.statuses[bad] == "Complete"
    assert "released into service by a human" in fleet.messages[bad]
    assert "hardware suspect" in fleet.messages[bad]  # what it had failed with
    assert done.failed_nodes == (bad,)


BAD = "gpu-node-0000"


def suspect_fleet() -> tuple[FakeFleet, dict[str, bool]]:
    """Two nodes; ``BAD``'s XID series shows a fault while ``faulty["now"]``."""
    fleet = FakeFleet(size=2)
    faulty = {"now": True}
    fleet.metric = lambda node, promql: answer(5) if node == BAD and faulty["now"] else answer(0)
    return fleet, faulty


async def test_a_hardware_suspect_node_re_gates_by_itself_until_a_run_passes(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    fleet, faulty = suspect_fleet()
    bad, name = BAD, unique()
    handle, queue = await start(
        skipping_client, fleet, rollout_input(rollback_in_one_batch(), name=name, interrupt=None)
    )

    def gated_runs() -> int:
        return sum(1 for node, _, _ in fleet.measured if node == bad)

    async with build_worker(skipping_client, fleet.activities(), task_queue=queue):
        done = await in_phase(handle, "RolledBack")
        assert (fleet.cordoned(), fleet.reasons[bad]) == ({bad}, NodeReason.HARDWARE_SUSPECT)
        assert gated_runs() == 2  # its gate, then again on the version the rollback returned
        stages = len(fleet.stage_requests)
        await time_skipping_env.sleep(
            timedelta(seconds=pause_before(1, SETTINGS.quarantine_regate_seconds))
        )  # still faulty: run 1 fails
        await until(
            lambda: (
                "run 1 in quarantine" in fleet.messages[bad] and "health gate failed" in fleet.messages[bad]
            ),
            30.0,
            "the first run in quarantine failed",
            blocking=False,
            details=lambda: fleet.messages[bad],
        )
        assert (fleet.cordoned(), fleet.reasons[bad], fleet.statuses[bad]) == (
            {bad},
            NodeReason.HARDWARE_SUSPECT,
            "Failed",
        )
        assert gated_runs() == 3
        assert "next in 600s" in fleet.messages[bad]  # the pause doubles after a run that failed
        faulty["now"] = False  # the series is clean: run 2 passes, by itself
        await time_skipping_env.sleep(timedelta(seconds=pause_before(2, SETTINGS.quarantine_regate_seconds)))
        await until(lambda: not fleet.cordoned(), 30.0, "the node back in service", blocking=False)
        node = skipping_client.get_workflow_handle(node_workflow_id(name, bad), result_type=NodeResult)
        passed = await node.result()
        progress = await query_progress(handle)
        await handle.terminate("test done")
    assert passed.status is RunStatus.SUCCEEDED, passed
    assert (fleet.reasons[bad], fleet.statuses[bad]) == (NodeReason.GATE_PASSED, "Complete")
    assert "health gate run 2 in quarantine passed" in fleet.messages[bad], fleet.messages[bad]
    assert gated_runs() == 4
    suspect = [n.message for who, n in fleet.notes if who == bad and n.reason == NodeReason.HARDWARE_SUSPECT]
    assert any("health gate run 1 in quarantine" in m for m in suspect), suspect
    # The completed rollout started nothing new: the node's own workflow re-gated it.
    assert len(fleet.stage_requests) == stages
    assert progress is not None
    assert progress.phase == "RolledBack", progress
    assert done.failed_nodes == (bad,)


async def test_a_new_pass_over_a_quarantined_node_ends_its_quarantine(client: Client) -> None:
    fleet, faulty = suspect_fleet()
    bad, name = BAD, unique()
    handle, queue = await start(
        client, fleet, rollout_input(rollback_in_one_batch(), name=name, interrupt=None)
    )
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await in_phase(handle, "RolledBack")
        node = client.get_workflow_handle(node_workflow_id(name, bad), result_type=NodeResult)
        quarantined = (await node.describe()).run_id
        assert await node.query(NodeWorkflow.stage) == "quarantine"
        faulty["now"] = False
        change = examples.profile(name=name, version="1.2.0", generation=3, interrupt=None)
        await handle.signal(
            RolloutWorkflow.spec_changed, SpecChange(profile=change, policy=rollback_in_one_batch())
        )
        # The next generation's start ends the quarantine (its run closes Failed) and begins a
        # new pass over the node, instead of waiting for a run that would re-gate for good.
        ended = await asyncio.wait_for(
            client.get_workflow_handle(node.id, run_id=quarantined, result_type=NodeResult).result(), 30
        )
        done = await in_phase(handle, "Complete")
        latest = await node.describe()
        await handle.terminate("test done")
    assert ended.status is RunStatus.FAILED
    assert latest.run_id != quarantined
    assert (done.updated, done.failed) == (2, 0)
    assert fleet.reasons[bad] == NodeReason.GATE_PASSED
    assert not fleet.cordoned()


async def test_an_abort_while_a_gate_failed_node_is_returned_keeps_it_cordoned(client: Client) -> None:
    fleet = FakeFleet(size=2)
    bad = "gpu-node-0000"
    fleet.metric = lambda node, promql: answer(5) if node == bad else answer(0)
    # The returned node's stages are held, so the abort finds it mid-return.
    fleet.holds = lambda request: request.node == bad and request.stage.value == "uninstall"
    name = unique()
    async with running(client, fleet, rollout_input(rollback_in_one_batch(), name=name)) as handle:
        await until_fleet(
            lambda: any(r.node == bad and r.stage.value == "uninstall" for r in fleet.stage_requests),
            "the failed node being returned",
        )
        await handle.signal(RolloutWorkflow.abort)
        node = client.get_workflow_handle(node_workflow_id(name, bad))

        async def aborted() -> bool:
            history = await node.fetch_history()
            return any(
                e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in history.events
            )

        await until_fleet(aborted, "the abort at the returned node")
        fleet.release.set()
        result = await handle.result()
    assert result.phase == "Aborted", result
    assert bad in fleet.cordoned()  # an abort hands other nodes back, never a gate-failed one
    assert fleet.reasons[bad] == NodeReason.HARDWARE_SUSPECT
    assert "aborted" in fleet.messages[bad], fleet.messages[bad]
