"""The node condition a rollout's turn shows on the nodes it holds for another node of their
workload unit (``activities.unitwaits``): written with the unit and since when, left alone while it
holds, removed once the unit starts or its bound has passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import Turn, plan_turn
from fleetwright.api.keys import unit_wait_condition_type
from fleetwright.kube.nodestatus import NodeStatusCondition
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner import convert
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeWorkload
from fleetwright.planner.rollout.refusals import UNIT_WAIT
from fleetwright.planner.rollout.state import RolloutState

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PROFILE = examples.profile("tuning")
KIND = unit_wait_condition_type("tuning")
JOB = (NodeWorkload(name="Job/ml/a", gpus=8),)


def gang() -> tuple[list[dict[str, Any]], list[str]]:
    """Four Ready nodes, a job on the first three."""
    nodes = fleet_nodes.fleet(4)
    for node in nodes:
        set_ready(node, ready=True)
    return nodes, [str(n["metadata"]["name"]) for n in nodes]


def set_ready(node: dict[str, Any], *, ready: bool) -> None:
    conditions = [c for c in node["status"].get("conditions") or [] if c["type"] != "Ready"]
    node["status"]["conditions"] = [{"type": "Ready", "status": str(ready)}, *conditions]


def carry(node: dict[str, Any], condition: NodeStatusCondition) -> None:
    """Put ``condition`` on the listed node, as the activity wrote it."""
    c = condition
    node["status"]["conditions"].append(
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
    )


def turn(nodes: list[dict[str, Any]], names: list[str], state: RolloutState | None, now: datetime) -> Turn:
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 4}}]
    spec = convert.rollout_spec(PROFILE, examples.policy(max_unavailable=4, steps=steps))
    request = DecideRequest(now=now, profile=PROFILE, state=state or begin(spec, NOW))
    return plan_turn(nodes, request, (), dict.fromkeys(names[:3], JOB))


def test_the_nodes_a_unit_holds_show_the_unit_and_since_when() -> None:
    nodes, names = gang()
    set_ready(nodes[1], ready=False)
    first = turn(nodes, names, None, NOW)
    # The unit in rollout order (a stable hash of the names): here the NotReady node is its first.
    order = ", ".join((names[1], names[2], names[0]))
    assert first.report.decision.state.unit_waits == {names[1]: NOW}
    expected = NodeStatusCondition(
        KIND,
        "True",
        "WaitingForUnit",
        f"held with its workload unit ({order}) since {NOW.isoformat()}: {names[1]} of its workload "
        f"cannot start (NotReady: the node is not Ready); at most until {(NOW + UNIT_WAIT).isoformat()}",
    )
    # Only the nodes it holds: not the NotReady node (blocked for itself), not the idle one.
    assert first.unit_waits == {names[0]: expected, names[2]: expected}


def test_a_condition_that_holds_is_not_written_again() -> None:
    nodes, names = gang()
    set_ready(nodes[1], ready=False)
    first = turn(nodes, names, None, NOW)
    for node in nodes:
        shown = first.unit_waits.get(str(node["metadata"]["name"]))
        if shown is not None:
            carry(node, shown)
    later = turn(nodes, names, first.report.decision.state, NOW + timedelta(minutes=5))
    assert later.unit_waits == {}


@pytest.mark.parametrize(
    ("back", "after"),
    [(True, timedelta(minutes=5)), (False, UNIT_WAIT)],
    ids=["its node is back", "the bound passed"],
)
def test_the_condition_is_removed_when_the_unit_starts(back: bool, after: timedelta) -> None:
    nodes, names = gang()
    set_ready(nodes[1], ready=False)
    first = turn(nodes, names, None, NOW)
    for name, shown in first.unit_waits.items():
        assert shown is not None
        carry(nodes[names.index(name)], shown)
    set_ready(nodes[1], ready=back)
    later = turn(nodes, names, first.report.decision.state, NOW + after)
    assert {s.node for s in later.report.decision.start} >= {names[0], names[2]}
    assert later.unit_waits == {names[0]: None, names[2]: None}
