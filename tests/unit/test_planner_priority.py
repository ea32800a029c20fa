"""Priority among profiles sharing a node: a later profile waits on a node while an earlier one
still has work there, and the rollout's turn shows it as a ``WaitingFor`` block."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import plan_turn
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner import convert
from fleetwright.planner.node.state import NodePackageState, PackageRecord, format_annotation
from fleetwright.planner.profile.priority import earlier_profiles, waiting_on
from fleetwright.planner.rollout.lifecycle import begin

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def profile(name: str, priority: int, *, deleting: bool = False) -> NodeProfile:
    body: dict[str, Any] = examples.profile(name).model_dump(mode="json", by_alias=True, exclude_none=True)
    body["spec"]["priority"] = priority
    if deleting:
        body["metadata"]["deletionTimestamp"] = NOW.isoformat()
    return NodeProfile.model_validate(body)


def complete(p: NodeProfile) -> dict[str, str]:
    desired = convert.package(p.spec.packages[0])
    state = NodePackageState(
        profile=p.metadata.name,
        packages={"tuning": PackageRecord(version=desired.version, config=dict(desired.config))},
    )
    key, value = format_annotation(state)
    return {key: value}


def test_only_lower_priority_and_earlier_names_come_first() -> None:
    infra, config, tie_a, tie_b = (
        profile("infra", 50),
        profile("config", 150),
        profile("a", 200),
        profile("b", 200),
    )
    everyone = [tie_b, config, infra, tie_a]
    assert [e.profile.metadata.name for e in earlier_profiles(tie_b, everyone)] == ["infra", "config", "a"]
    assert earlier_profiles(infra, everyone) == ()


def test_a_node_waits_while_an_earlier_profile_is_incomplete_there() -> None:
    infra, tuning = profile("infra", 50), profile("tuning", 200)
    earlier = earlier_profiles(tuning, [infra, tuning])
    assert waiting_on(earlier, {}, {}) == ("infra",)
    assert waiting_on(earlier, {}, complete(infra)) == ()


def test_a_deleting_earlier_profile_holds_nothing_back() -> None:
    infra, tuning = profile("infra", 50, deleting=True), profile("tuning", 200)
    assert earlier_profiles(tuning, [infra, tuning]) == ()


def test_the_turn_starts_only_where_the_earlier_profile_is_complete() -> None:
    infra, tuning = profile("infra", 50), profile("tuning", 200)
    nodes = fleet_nodes.fleet(3)
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    done = nodes[2]["metadata"]["name"]
    nodes[2]["metadata"]["annotations"].update(complete(infra))
    one_batch = [{"name": "all", "batches": {"strategy": "fixed", "initial": 3}}]
    spec = convert.rollout_spec(tuning, examples.policy(max_unavailable=3, steps=one_batch))
    request = DecideRequest(now=NOW, profile=tuning, state=begin(spec, NOW))
    report = plan_turn(nodes, request, [infra, tuning]).report
    assert [s.node for s in report.decision.start] == [done]
    reasons = {b.node: b.reason for b in report.decision.blocked}
    assert all(reasons[n["metadata"]["name"]].startswith("WaitingFor") for n in nodes[:2])
    assert "infra" in reasons[nodes[0]["metadata"]["name"]]
    # Without the other profile nothing waits (the workflow tier's fake fleet passes none).
    assert len(plan_turn(nodes, request).report.decision.start) == 3
