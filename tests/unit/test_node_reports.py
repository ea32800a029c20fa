"""A node's report counts for the run its rollout waits on: the report a retried activity sends
again after the rollout moved to another target is not the running node's own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetwright.activities.payloads import DecideRequest, NodeResult
from fleetwright.activities.rollout import observe
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner import convert
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.planner.rollout.state import RunningNode

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def run_status(result: NodeResult, *, earlier: bool = False) -> RunStatus | None:
    profile = examples.profile("tuning")
    state = begin(convert.rollout_spec(profile, examples.policy()), NOW)
    nodes = fleet_nodes.fleet(2)
    node = nodes[0]["metadata"]["name"]
    if earlier:
        state = state.model_copy(update={"running_for_earlier_target": (node,)})
    else:
        run = RunningNode(node=node, scope="default", batch=1, started_at=NOW)
        state = state.model_copy(update={"running": (run,)})
    request = DecideRequest(
        now=NOW, profile=profile, state=state, results=(result.model_copy(update={"node": node}),)
    )
    observations, _ = observe(nodes, request)
    return next(o.run for o in observations.nodes if o.name == node)


def test_a_running_node_takes_its_own_targets_report_only() -> None:
    profile = examples.profile("tuning")
    target = convert.rollout_spec(profile, examples.policy()).target
    own = NodeResult(node="", target=target, status=RunStatus.SUCCEEDED)
    assert run_status(own) is RunStatus.SUCCEEDED
    stale = own.model_copy(update={"target": "an-earlier-target"})
    assert run_status(stale) is RunStatus.RUNNING


def test_a_node_running_for_an_earlier_target_takes_its_report_whatever_the_target() -> None:
    stale = NodeResult(node="", target="an-earlier-target", status=RunStatus.FAILED, message="boom")
    assert run_status(stale, earlier=True) is RunStatus.FAILED
