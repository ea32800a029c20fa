"""The fleet gate of a soak, pure: which checks are due when (from the moment the scope entered
the soak), over the nodes updated so far, and how the soak judges what was measured: it waits for
the next measurement, halts on a failure, waits for approval when Inconclusive, holds while
Prometheus does not answer (MonitoringUnavailable) until it answers again, and ends when the
duration passed and every check passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.health.analysis import CheckPhase, Measurement, ScopedMeasurement
from fleetwright.planner.rollout import fleetgate
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.rollout.state import FleetGateOutcome, RolloutState

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
CHECK = {"name": "fleet-xid", "query": 'sum(x{n=~"{{nodes}}"})', "successCondition": "result[0] == 0"}


def soaking(check: dict[str, Any]) -> RolloutState:
    """A rollout whose canary node n0 is updated and whose gates scope entered the soak at T0."""
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 10, "checks": [check["name"]]}},
        {"name": "rest", "batches": {"initial": 2}},
    ]
    deployment = examples.policy(max_unavailable=2, steps=steps)
    spec_json = deployment.spec.model_dump(by_alias=True, exclude_none=True) | {"healthChecks": [check]}
    deployment = deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec_json)})
    spec = convert.rollout_spec(examples.profile("p"), deployment)
    state = begin(spec, T0)
    gates = state.gates.model_copy(update={"step": 1, "entered_at": T0, "canary": ("n0",)})
    return state.model_copy(update={"gates": gates, "updated": ("n0",)})


def turn(state: RolloutState, now: datetime, *phases: CheckPhase, approvals: tuple[str, ...] = ()) -> Any:
    measured = tuple(
        ScopedMeasurement(scope="rollout", step=1, measurement=Measurement(check="fleet-xid", phase=p))
        for p in phases
    )
    nodes = tuple(NodeObservation(name=f"n{i}", ready=True) for i in range(4))
    observations = Observations(nodes=nodes, fleet_measurements=measured, approvals=approvals)
    return decide(state, observations, now)


def test_measurements_are_due_on_the_checks_schedule_over_the_updated_nodes() -> None:
    state = soaking({**CHECK, "count": 3, "intervalSeconds": 5, "initialDelaySeconds": 2})
    assert fleetgate.due(state, T0 + timedelta(seconds=1)) == ()
    (first,) = fleetgate.due(state, T0 + timedelta(seconds=2))
    assert (first.scope, first.step, first.check.name) == ("rollout", 1, "fleet-xid")
    assert first.placeholders["nodes"] == "n0"
    passed = Measurement(check="fleet-xid", phase=CheckPhase.SUCCESSFUL)
    one = state.gates.model_copy(update={"fleet_gate": (passed,)})
    later = state.model_copy(update={"gates": one})
    assert fleetgate.due(later, T0 + timedelta(seconds=6)) == ()
    assert len(fleetgate.due(later, T0 + timedelta(seconds=7))) == 1


def test_the_soak_waits_for_its_checks_then_starts_the_batches() -> None:
    state = soaking({**CHECK, "count": 2, "intervalSeconds": 5})
    first = turn(state, T0, CheckPhase.SUCCESSFUL)
    assert not first.start
    assert first.state.gates.fleet_gate[0].phase is CheckPhase.SUCCESSFUL
    assert first.wake_at == T0 + timedelta(seconds=5)  # the next measurement
    second = turn(first.state, T0 + timedelta(seconds=10), CheckPhase.SUCCESSFUL)
    assert {s.node for s in second.start} == {"n1", "n2"}  # soaked and passed: the batch starts
    assert second.state.gates.fleet_gate == ()  # the next step starts clean


def test_a_failed_check_halts_before_the_next_batch() -> None:
    decision = turn(soaking({**CHECK, "count": 3}), T0, CheckPhase.FAILED)
    assert decision.state.halt is not None
    assert decision.fleet_gates == (FleetGateOutcome(step="soak", outcome=CheckPhase.FAILED),)
    assert "soak watch: fleet gate failed: fleet-xid Failed (1/3" in decision.state.halt.reason
    assert not decision.start


def test_an_inconclusive_check_waits_for_the_soaks_approval() -> None:
    state = soaking({**CHECK, "count": 3})
    waiting = turn(state, T0 + timedelta(seconds=20), CheckPhase.INCONCLUSIVE)
    assert not waiting.start
    assert "fleetwright approve <profile> rollout/watch" in waiting.message
    approved = turn(waiting.state, T0 + timedelta(seconds=21), approvals=("rollout/watch",))
    assert approved.start
    assert "rollout/watch" in state.spec.policy.approval_ids()


SOAK_HELD = FleetGateOutcome(step="soak", outcome=CheckPhase.MONITORING_UNAVAILABLE)


def test_a_soak_whose_prometheus_does_not_answer_holds_then_resumes_by_itself() -> None:
    state = soaking({**CHECK, "count": 2, "intervalSeconds": 5, "consecutiveErrorLimit": 1})
    first = turn(state, T0, CheckPhase.ERROR)
    assert first.wake_at == T0 + timedelta(seconds=5)  # an Error is measured again an interval on
    # Named from the first Error, with the count of Errors in a row and when it holds.
    named = "soak watch fleet gate MonitoringUnavailable: fleet-xid MonitoringUnavailable ("
    assert f"{named}1 Error in a row, held after 2; 0/2 counted): no answer" in first.message
    assert "fleetwright approve" not in first.message  # not held yet: nothing to approve
    held = turn(first.state, T0 + timedelta(seconds=5), CheckPhase.ERROR)
    assert held.state.halt is None
    assert not held.start
    assert f"{named}held: 2 or more Errors in a row; 0/2 counted)" in held.message
    assert "waiting for Prometheus to answer" in held.message
    assert held.wake_at == T0 + timedelta(seconds=10)  # still measuring while held
    assert first.fleet_gates == ()  # named, not held: the metric counts holds
    assert held.fleet_gates == (SOAK_HELD,)  # the hold began: counted once
    for minute in range(1, 60):  # an hour down: no halt, and the state keeps limit + 1 Errors
        held = turn(held.state, T0 + timedelta(minutes=minute), CheckPhase.ERROR)
        assert held.state.halt is None
        assert not held.start
        assert held.fleet_gates == ()  # the same hold
    assert len(held.state.gates.fleet_gate) == 2
    answered = turn(held.state, T0 + timedelta(minutes=60), CheckPhase.SUCCESSFUL)
    assert "MonitoringUnavailable" not in answered.message  # the first answer lifted the hold
    assert not answered.start  # one of two counted measurements so far
    passed = turn(answered.state, T0 + timedelta(minutes=60, seconds=5), CheckPhase.SUCCESSFUL)
    assert {s.node for s in passed.start} == {"n1", "n2"}
    assert answered.fleet_gates == ()
    assert passed.fleet_gates == (FleetGateOutcome(step="soak", outcome=CheckPhase.SUCCESSFUL),)


def test_only_a_failed_measurement_halts_a_held_soak() -> None:
    state = soaking({**CHECK, "count": 3, "consecutiveErrorLimit": 0})
    held = turn(state, T0, CheckPhase.ERROR)
    assert held.state.halt is None
    failed = turn(held.state, T0 + timedelta(seconds=30), CheckPhase.FAILED)
    assert failed.state.halt is not None
    assert "soak watch: fleet gate failed: fleet-xid Failed (1/3" in failed.state.halt.reason


def test_approving_a_held_soak_passes_its_gate() -> None:
    state = soaking({**CHECK, "count": 3, "consecutiveErrorLimit": 0})
    held = turn(state, T0 + timedelta(seconds=20), CheckPhase.ERROR)
    assert "fleetwright approve <profile> rollout/watch" in held.message
    approved = turn(held.state, T0 + timedelta(seconds=21), approvals=("rollout/watch",))
    assert approved.start


# -- the fleet gate in the background of a batches step ----------------------------------------


def batching(check: dict[str, Any], action: str = "halt", *, canary: bool = True) -> RolloutState:
    """A rollout of n0..n3, one node per batch, whose batches step watches ``check``; with a
    canary, n0 is its canary, updated, so the default compartment enters the batches at T0."""
    rest = {"name": "rest", "batches": {"initial": 1, "checks": [check["name"]]}}
    steps = [{"name": "canary", "canary": {"count": 1}}, rest] if canary else [rest]
    deployment = examples.policy(max_unavailable=1, steps=steps)
    spec_json = deployment.spec.model_dump(by_alias=True, exclude_none=True) | {
        "healthChecks": [check],
        "failure": {"maxFailedNodes": 0, "action": action},
    }
    deployment = deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec_json)})
    state = begin(convert.rollout_spec(examples.profile("p"), deployment), T0)
    if not canary:
        return state
    gates = state.gates.model_copy(update={"step": 1, "canary": ("n0",)})
    return state.model_copy(update={"gates": gates, "updated": ("n0",)})


def batch_turn(
    state: RolloutState,
    now: datetime,
    *phases: CheckPhase,
    done: tuple[str, ...] = (),
    approvals: tuple[str, ...] = (),
) -> Any:
    """A turn of ``batching``'s rollout: ``phases`` measured for the default compartment's batches
    step, the nodes ``done`` finished."""
    measured = tuple(
        ScopedMeasurement(scope="default", step=0, measurement=Measurement(check="fleet-xid", phase=p))
        for p in phases
    )
    nodes = tuple(
        NodeObservation(name=f"n{i}", ready=True, run=RunStatus.SUCCEEDED if f"n{i}" in done else None)
        for i in range(4)
    )
    observations = Observations(nodes=nodes, fleet_measurements=measured, approvals=approvals)
    return decide(state, observations, now)


def started(decision: Any) -> tuple[str, ...]:
    return tuple(s.node for s in decision.start)


def test_background_checks_run_again_and_again_one_interval_apart_while_batches_run() -> None:
    state = batching({**CHECK, "count": 2, "intervalSeconds": 5})
    first = batch_turn(state, T0)
    assert len(started(first)) == 1
    (request,) = fleetgate.due(first.state, T0)  # due at once, over the canary
    assert (request.scope, request.step, request.placeholders["nodes"]) == ("default", 0, "n0")
    assert first.wake_at == T0 + timedelta(seconds=1)  # taken by the next turn, while the node runs
    second = batch_turn(first.state, T0 + timedelta(seconds=1), CheckPhase.SUCCESSFUL)
    assert second.wake_at == T0 + timedelta(seconds=6)  # one interval after the last
    assert "default: batches rest fleet gate fleet-xid Running (1/2, last Successful" in second.message
    assert fleetgate.due(second.state, T0 + timedelta(seconds=5)) == ()
    third = batch_turn(second.state, T0 + timedelta(seconds=6), CheckPhase.SUCCESSFUL)
    assert third.state.scope("default").fleet_gate == ()  # the run passed and left; the next begins
    assert second.fleet_gates == ()
    assert third.fleet_gates == (FleetGateOutcome(step="batches", outcome=CheckPhase.SUCCESSFUL),)
    assert third.wake_at == T0 + timedelta(seconds=11)
    assert len(fleetgate.due(third.state, T0 + timedelta(seconds=11))) == 1
    # A turn long after (a worker was down): the next measurement is an interval on, no burst.
    late = batch_turn(third.state, T0 + timedelta(seconds=500), CheckPhase.SUCCESSFUL, done=started(first))
    assert len(started(late)) == 1  # the gate passes: the next batch starts
    assert fleetgate.due(late.state, T0 + timedelta(seconds=504)) == ()
    (after,) = fleetgate.due(late.state, T0 + timedelta(seconds=505))
    assert set(after.placeholders["nodes"].split("|")) == {"n0", *started(first)}


def test_nothing_is_measured_before_a_node_was_updated() -> None:
    state = batching({**CHECK, "count": 2, "intervalSeconds": 5}, canary=False)
    first = batch_turn(state, T0)
    assert len(started(first)) == 1
    assert fleetgate.due(first.state, T0 + timedelta(hours=1)) == ()  # {{nodes}} would match nothing
    assert first.wake_at is None  # the node's report wakes the rollout
    second = batch_turn(first.state, T0 + timedelta(minutes=10), done=started(first))
    assert len(fleetgate.due(second.state, T0 + timedelta(minutes=10))) == 1


def test_a_background_check_failing_halts_before_the_next_batch() -> None:
    state = batching({**CHECK, "count": 3})
    first = batch_turn(state, T0)
    failed = batch_turn(first.state, T0 + timedelta(seconds=1), CheckPhase.FAILED, done=started(first))
    assert not failed.start  # the first batch finished, yet the second does not start
    assert failed.state.halt is not None
    assert "batches rest: fleet gate failed: fleet-xid Failed (1/3" in failed.state.halt.reason
    assert failed.fleet_gates == (FleetGateOutcome(step="batches", outcome=CheckPhase.FAILED),)
    assert fleetgate.due(failed.state, T0 + timedelta(hours=1)) == ()  # halted: nothing measured


def test_each_run_counts_its_own_failures_and_a_failed_run_rolls_back() -> None:
    state = batching({**CHECK, "count": 2, "failureLimit": 1}, action="rollback")
    first = batch_turn(state, T0)
    one = batch_turn(first.state, T0 + timedelta(seconds=1), CheckPhase.FAILED)
    two = batch_turn(one.state, T0 + timedelta(seconds=11), CheckPhase.SUCCESSFUL)
    assert two.state.scope("default").fleet_gate == ()  # passed within its failureLimit
    three = batch_turn(two.state, T0 + timedelta(seconds=21), CheckPhase.FAILED)
    assert three.state.halt is None  # a new run, its own limit
    four = batch_turn(three.state, T0 + timedelta(seconds=31), CheckPhase.FAILED)
    assert four.state.spec.rollback is not None  # the rule fired with action rollback
    assert "fleet gate failed: fleet-xid Failed (2/2" in four.state.spec.rollback.reason
    assert four.state.spec.policy.batches_step().checks == ()  # a rollback is not gated


def test_an_inconclusive_background_check_holds_new_batches_until_approved() -> None:
    state = batching({**CHECK, "count": 3})
    first = batch_turn(state, T0)
    done = started(first)
    held = batch_turn(first.state, T0 + timedelta(seconds=1), CheckPhase.INCONCLUSIVE, done=done)
    assert not held.start
    assert held.state.halt is None
    assert "no new batch until `fleetwright approve <profile> default/rest`" in held.message
    assert fleetgate.due(held.state, T0 + timedelta(hours=1)) == ()  # waits for a human
    still = batch_turn(held.state, T0 + timedelta(hours=1), done=done)
    assert not still.start  # never passes by itself
    approved = batch_turn(still.state, T0 + timedelta(hours=1), done=done, approvals=("default/rest",))
    assert len(approved.start) == 1
    assert approved.state.scope("default").fleet_gate == ()  # the approved run left
    assert len(fleetgate.due(approved.state, T0 + timedelta(hours=1))) == 1  # and the next begins
    assert "default/rest" in state.spec.policy.approval_ids(s.name for s in state.compartments)


def test_a_background_check_without_answers_holds_new_batches_then_resumes_by_itself() -> None:
    state = batching({**CHECK, "count": 2, "intervalSeconds": 5, "consecutiveErrorLimit": 1}, "rollback")
    first = batch_turn(state, T0)
    done = started(first)
    one = batch_turn(first.state, T0 + timedelta(seconds=1), CheckPhase.ERROR, done=done)
    assert len(one.start) == 1  # an Error within the limit holds nothing, but is named at once
    named = "batches rest fleet gate MonitoringUnavailable: fleet-xid MonitoringUnavailable (1 Error in"
    assert named in one.message, one.message
    assert "batches go on until its Errors hold the gate" in one.message
    second = one.start[0].node
    held = batch_turn(one.state, T0 + timedelta(seconds=6), CheckPhase.ERROR, done=(*done, second))
    assert not held.start
    assert held.state.halt is None
    assert held.state.spec.rollback is None
    assert "batches rest fleet gate MonitoringUnavailable" in held.message
    assert "no new batch until Prometheus answers" in held.message
    assert one.fleet_gates == ()
    assert held.fleet_gates == (FleetGateOutcome(step="batches", outcome=CheckPhase.MONITORING_UNAVAILABLE),)
    assert held.wake_at == T0 + timedelta(seconds=11)  # measuring on while held
    assert len(fleetgate.due(held.state, T0 + timedelta(seconds=11))) == 1
    answered = batch_turn(held.state, T0 + timedelta(seconds=11), CheckPhase.SUCCESSFUL, done=(*done, second))
    assert len(answered.start) == 1  # the first answer lifted the hold: batches go on
    assert answered.state.spec.rollback is None


def test_steps_without_checks_keep_their_state_and_requests_as_before() -> None:
    spec = convert.rollout_spec(examples.profile("p"), examples.policy(max_unavailable=1))
    state = begin(spec, T0)
    nodes = tuple(NodeObservation(name=f"n{i}", ready=True) for i in range(4))
    decision = decide(state, Observations(nodes=nodes), T0)
    assert fleetgate.due(decision.state, T0 + timedelta(days=1)) == ()
    dumped = decision.state.model_dump(mode="json")
    assert all("fleet_gate_next" not in s for s in dumped["compartments"])
    assert "checks" not in dumped["spec"]["policy"]["steps"][-1]
    assert "fleet_gates" not in decision.model_dump(mode="json")  # what 0.1.0 reads
