"""A malformed ``fleetwright.io/state.<profile>`` annotation stops work on that node only
(docs/chaos.md, finding 3): the turn still decides, the node is listed as blocked with the key and
the problem, an unreadable record of another profile counts as that profile being busy there, and
the rest of the fleet proceeds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.activities.payloads import DecideReport, DecideRequest
from fleetwright.activities.rollout import plan_turn
from fleetwright.api.keys import state_key
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner import convert
from fleetwright.planner.node.state import NodePackageState, PackageRecord, format_annotation
from fleetwright.planner.profile.priority import earlier_profiles, waiting_on
from fleetwright.planner.profile.runtime import complete_on
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.snapshot import observe_node
from fleetwright.planner.rollout.state import Phase

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CORRUPT = '{"v":1,"profile":'


def ready_fleet(count: int) -> list[dict[str, Any]]:
    nodes = fleet_nodes.fleet(count)
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return nodes


def name(node: dict[str, Any]) -> str:
    return str(node["metadata"]["name"])


def complete(p: NodeProfile) -> dict[str, str]:
    desired = convert.package(p.spec.packages[0])
    state = NodePackageState(
        profile=p.metadata.name,
        packages={"tuning": PackageRecord(version=desired.version, config=dict(desired.config))},
    )
    key, value = format_annotation(state)
    return {key: value}


def turn(nodes: list[dict[str, Any]], p: NodeProfile, *profiles: NodeProfile) -> DecideReport:
    one_batch = [{"name": "all", "batches": {"strategy": "fixed", "initial": len(nodes)}}]
    spec = convert.rollout_spec(p, examples.policy(max_unavailable=len(nodes), steps=one_batch))
    return plan_turn(nodes, DecideRequest(now=NOW, profile=p, state=begin(spec, NOW)), profiles).report


def test_an_unreadable_own_record_blocks_that_node_and_the_rest_start() -> None:
    tuning = examples.profile("tuning")
    nodes = ready_fleet(3)
    key = state_key("tuning")
    nodes[0]["metadata"]["annotations"][key] = CORRUPT
    report = turn(nodes, tuning)
    assert [s.node for s in report.decision.start] == [name(n) for n in nodes[1:]]
    reasons = {b.node: b.reason for b in report.decision.blocked}
    assert reasons[name(nodes[0])].startswith("UnreadableState: ")
    assert key in reasons[name(nodes[0])]
    assert "unreadable package state" in reasons[name(nodes[0])]
    assert report.decision.blocked_reasons == {"UnreadableState": 1}


def test_a_fleet_complete_but_for_an_unreadable_record_ends_with_the_node_left_out() -> None:
    tuning = examples.profile("tuning")
    nodes = ready_fleet(3)
    nodes[0]["metadata"]["annotations"][state_key("tuning")] = "not json"
    for node in nodes[1:]:
        node["metadata"]["annotations"].update(complete(tuning))
    decision = turn(nodes, tuning).decision
    assert decision.phase is Phase.COMPLETE
    assert [(b.node, b.reason.split(":")[0]) for b in decision.blocked] == [
        (name(nodes[0]), "UnreadableState")
    ]
    assert "1 left out" in decision.message


def test_a_record_of_the_wrong_format_version_is_unreadable_too() -> None:
    node = ready_fleet(1)[0]
    node["metadata"]["annotations"][state_key("tuning")] = '{"v":9,"profile":"tuning","packages":{}}'
    observation = observe_node(node, "tuning")
    assert observation.unreadable is not None
    assert "unknown state format v9" in observation.unreadable
    assert observation.packages == {}


def test_an_unreadable_record_of_another_profile_means_that_profile_is_busy_there() -> None:
    tuning = examples.profile("tuning")
    nodes = ready_fleet(2)
    other = state_key("gpu-driver")
    nodes[0]["metadata"]["annotations"][other] = CORRUPT
    assert observe_node(nodes[0], "tuning").disruptions == (f"{other} unreadable",)
    assert observe_node(nodes[0], "tuning").unreadable is None
    report = turn(nodes, tuning)
    assert [s.node for s in report.decision.start] == [name(nodes[1])]
    reasons = {b.node: b.reason for b in report.decision.blocked}
    assert reasons[name(nodes[0])] == f"Busy: {other} unreadable"


def test_an_unreadable_record_of_an_earlier_profile_is_not_complete() -> None:
    infra = examples.profile("infra")
    body = examples.profile("tuning").model_dump(mode="json", by_alias=True, exclude_none=True)
    body["spec"]["priority"] = infra.spec.priority + 1
    tuning = NodeProfile.model_validate(body)
    corrupt = {state_key("infra"): CORRUPT}
    assert waiting_on(earlier_profiles(tuning, [infra, tuning]), {}, corrupt) == ("infra",)
    assert not complete_on(infra, corrupt)
    assert complete_on(infra, complete(infra))
