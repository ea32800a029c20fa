"""The fleet gate of a soak, pure: which checks are due when (from the moment the scope entered
the soak), over the nodes updated so far, and how the soak judges what was measured: it waits for
the next measurement, halts on a failure, waits for approval when Inconclusive and ends when the
duration passed and every check passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwright.local import examples
from fleetwright.planner import convert, fleetgate
from fleetwright.planner.analysis import Measurement, Phase, ScopedMeasurement
from fleetwright.planner.observations import NodeObservation, Observations
from fleetwright.planner.rollout import begin, decide
from fleetwright.planner.rolloutstate import RolloutState

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


def turn(state: RolloutState, now: datetime, *phases: Phase, approvals: tuple[str, ...] = ()) -> Any:
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
    passed = Measurement(check="fleet-xid", phase=Phase.SUCCESSFUL)
    one = state.gates.model_copy(update={"fleet_gate": (passed,)})
    later = state.model_copy(update={"gates": one})
    assert fleetgate.due(later, T0 + timedelta(seconds=6)) == ()
    assert len(fleetgate.due(later, T0 + timedelta(seconds=7))) == 1


def test_the_soak_waits_for_its_checks_then_starts_the_batches() -> None:
    state = soaking({**CHECK, "count": 2, "intervalSeconds": 5})
    first = turn(state, T0, Phase.SUCCESSFUL)
    assert not first.start
    assert first.state.gates.fleet_gate[0].phase is Phase.SUCCESSFUL
    assert first.wake_at == T0 + timedelta(seconds=5)  # the next measurement
    second = turn(first.state, T0 + timedelta(seconds=10), Phase.SUCCESSFUL)
    assert {s.node for s in second.start} == {"n1", "n2"}  # soaked and passed: the batch starts
    assert second.state.gates.fleet_gate == ()  # the next step starts clean


def test_a_failed_check_halts_before_the_next_batch() -> None:
    decision = turn(soaking({**CHECK, "count": 3}), T0, Phase.FAILED)
    assert decision.state.halt is not None
    assert "soak watch: fleet gate failed: fleet-xid Failed (1/3" in decision.state.halt.reason
    assert not decision.start


def test_an_inconclusive_check_waits_for_the_soaks_approval() -> None:
    state = soaking({**CHECK, "count": 3})
    waiting = turn(state, T0 + timedelta(seconds=20), Phase.INCONCLUSIVE)
    assert not waiting.start
    assert "fleetwright approve <profile> rollout/watch" in waiting.message
    approved = turn(waiting.state, T0 + timedelta(seconds=21), approvals=("rollout/watch",))
    assert approved.start
    assert "rollout/watch" in state.spec.policy.approval_ids()
