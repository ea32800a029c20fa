"""A node workflow that ends because its Node was deleted reports ``gone``: the planner drops the
node from the running set without counting a failure (it left the fleet), so ``maxFailedNodes: 0``
does not halt, and a Node re-registered under the same name is planned afresh."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.policy.model import BatchesStep, Budget, RolloutPolicy, Strategy, StrategyKind
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.state import Phase

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_a_gone_node_is_neither_failed_nor_running_and_is_planned_again() -> None:
    one_at_a_time = BatchesStep(strategy=Strategy(kind=StrategyKind.FIXED, initial_batch=1))
    spec = RolloutSpec(
        profile="p",
        packages=(DesiredPackage(name="driver", version="2.0.0", interrupt=REBOOT),),
        policy=RolloutPolicy(max_unavailable=Budget(count=1), steps=(one_at_a_time,)),
    )
    nodes = {n: NodeObservation(name=n) for n in ("n0", "n1")}
    first = decide(begin(spec, T0), Observations(nodes=tuple(nodes.values())), T0)
    (start,) = first.start
    nodes[start.node] = nodes[start.node].model_copy(
        update={"run": RunStatus.GONE, "message": "node deleted"}
    )
    second = decide(first.state, Observations(nodes=tuple(nodes.values())), T0)
    assert second.phase is not Phase.HALTED
    assert second.state.failed == ()
    assert start.node not in second.state.updated
    # Its slot is free again, and the node (re-registered under the name) still needs the update.
    assert [s.node for s in second.start] == [start.node]
