"""``sequencing: all``: a profile starts on a node only once every earlier profile sharing the node
is complete on all the nodes it targets, and a wait that no rollout will end by itself (a failed
node, a node the earlier rollout is blocked on, a rollout stopped with nodes left) is named."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import plan_turn
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner import convert
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import NodePackageState, PackageRecord, PendingChange, format_annotation
from fleetwright.planner.profile.priority import earlier_profiles, fleet_completion, sequencing_hold
from fleetwright.planner.rollout.lifecycle import begin

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ONE_BATCH = [{"name": "all", "batches": {"strategy": "fixed", "initial": 10}}]
GROUP = "group"


def profile(
    name: str,
    priority: int,
    *,
    sequencing: str = "node",
    group: str | None = None,
    runtime_required: bool = False,
    status: dict[str, Any] | None = None,
) -> NodeProfile:
    body: dict[str, Any] = examples.profile(name, selector={GROUP: group} if group else None).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    body["spec"].update(priority=priority, sequencing=sequencing, runtimeRequired=runtime_required)
    if status is not None:
        body["status"] = {"observedGeneration": body["metadata"]["generation"], **status}
    return NodeProfile.model_validate(body)


def record(p: NodeProfile, *, failed: bool = False) -> dict[str, str]:
    desired = convert.package(p.spec.packages[0])
    package = (
        PackageRecord(
            pending=PendingChange(
                version=desired.version, config=dict(desired.config), stages=(Stage.APPLY,), failed="exit 1"
            )
        )
        if failed
        else PackageRecord(version=desired.version, config=dict(desired.config))
    )
    key, value = format_annotation(NodePackageState(profile=p.metadata.name, packages={"tuning": package}))
    return {key: value}


def fleet(n: int) -> list[dict[str, Any]]:
    nodes = fleet_nodes.fleet(n)
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return nodes


def name(node: dict[str, Any]) -> str:
    return str(node["metadata"]["name"])


def turn(later: NodeProfile, nodes: list[dict[str, Any]], everyone: list[NodeProfile]) -> dict[str, str]:
    """Node -> blocked reason of ``later``'s turn; asserts every other targeted node started."""
    spec = convert.rollout_spec(later, examples.policy(max_unavailable=len(nodes), steps=ONE_BATCH))
    report = plan_turn(nodes, DecideRequest(now=NOW, profile=later, state=begin(spec, NOW)), everyone).report
    blocked = {b.node: b.reason for b in report.decision.blocked}
    targeted = {name(n) for n in nodes if convert.targets(later, n["metadata"]["labels"])}
    assert {s.node for s in report.decision.start} == targeted - blocked.keys()
    return blocked


def test_a_node_complete_for_the_earlier_profile_still_waits_for_the_rest_of_its_nodes() -> None:
    infra, tuning = profile("infra", 50), profile("tuning", 200, sequencing="all")
    nodes = fleet(3)
    nodes[0]["metadata"]["annotations"].update(record(infra))
    blocked = turn(tuning, nodes, [infra, tuning])
    assert set(blocked) == {name(n) for n in nodes}
    assert all(r.startswith("WaitingFor: earlier profile infra on all its nodes") for r in blocked.values())
    # Per-node sequencing starts where infra is done.
    per_node = profile("tuning", 200)
    assert set(turn(per_node, nodes, [infra, per_node])) == {name(n) for n in nodes[1:]}


def test_it_starts_everywhere_once_the_earlier_profile_is_complete_on_all_its_nodes() -> None:
    infra, tuning = profile("infra", 50), profile("tuning", 200, sequencing="all")
    nodes = fleet(3)
    for node in nodes:
        node["metadata"]["annotations"].update(record(infra))
    assert turn(tuning, nodes, [infra, tuning]) == {}


def test_a_failed_node_of_the_earlier_profile_is_a_named_block_that_mentions_the_taint() -> None:
    infra = profile("infra", 50)
    tuning = profile("tuning", 200, sequencing="all", runtime_required=True)
    nodes = fleet(3)
    for node in nodes[:2]:
        node["metadata"]["annotations"].update(record(infra))
    nodes[2]["metadata"]["annotations"].update(record(infra, failed=True))
    blocked = turn(tuning, nodes, [infra, tuning])
    assert set(blocked) == {name(n) for n in nodes}
    reason = blocked[name(nodes[0])]
    assert reason.startswith(f"EarlierProfileFailed: infra failed on {name(nodes[2])}")
    assert "runtime-required taint" in reason


def test_a_node_the_earlier_rollout_is_blocked_on_is_named_with_its_reason() -> None:
    nodes = fleet(2)
    stuck = name(nodes[1])
    infra = profile(
        "infra",
        50,
        status={
            "phase": "Blocked",
            "nodeIssues": [
                {"node": stuck, "reason": "NodeBlocked", "message": "DrainBlocked: pod a/b, PDB c"}
            ],
        },
    )
    tuning = profile("tuning", 200, sequencing="all")
    nodes[0]["metadata"]["annotations"].update(record(infra))
    reason = turn(tuning, nodes, [infra, tuning])[name(nodes[0])]
    assert reason.startswith(f"EarlierProfileBlocked: infra is blocked on {stuck} (DrainBlocked)")
    assert "runtime-required" not in reason


def test_an_earlier_rollout_stopped_with_a_node_left_out_is_named() -> None:
    """A node the earlier rollout skipped: it reports Degraded (complete, a node left out), and the
    node will never be complete for it."""
    nodes = fleet(2)
    infra = profile("infra", 50, status={"phase": "Degraded"})
    tuning = profile("tuning", 200, sequencing="all")
    nodes[0]["metadata"]["annotations"].update(record(infra))
    reason = turn(tuning, nodes, [infra, tuning])[name(nodes[0])]
    assert reason.startswith(f"EarlierProfileStopped: infra is Degraded with {name(nodes[1])} not complete")


def test_a_status_of_an_older_generation_says_nothing_about_the_rollout() -> None:
    nodes = fleet(2)
    infra = profile("infra", 50, status={"phase": "Complete"})
    stale = infra.model_copy(
        update={"status": infra.status.model_copy(update={"observed_generation": 0})}  # type: ignore[union-attr]
    )
    completion = fleet_completion(earlier_profiles(profile("t", 200), [stale]), [(name(nodes[0]), {}, {})])
    assert completion[0].reason(runtime_required=False).startswith("WaitingFor")


def test_only_earlier_profiles_sharing_the_node_hold_it() -> None:
    """An earlier profile on other nodes only, however stuck, holds nothing here."""
    nodes = fleet(2)
    nodes[0]["metadata"]["labels"][GROUP] = "a"
    nodes[1]["metadata"]["labels"][GROUP] = "b"
    infra = profile("infra", 50, group="b")
    nodes[1]["metadata"]["annotations"].update(record(infra, failed=True))
    tuning = profile("tuning", 200, sequencing="all", group="a")
    assert turn(tuning, nodes, [infra, tuning]) == {}


def test_per_node_sequencing_has_no_fleet_hold() -> None:
    infra, tuning = profile("infra", 50), profile("tuning", 200)
    completion = fleet_completion(earlier_profiles(tuning, [infra]), [("n", {}, {})])
    assert sequencing_hold(tuning, completion, {}) is None


@settings(max_examples=60, deadline=None)
@given(
    standings=st.lists(st.sampled_from(["none", "complete", "failed"]), min_size=1, max_size=8),
    shared=st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_no_node_starts_while_an_earlier_profile_sharing_it_is_incomplete_anywhere(
    standings: list[str], shared: list[bool]
) -> None:
    """Whatever the earlier profile's state across the fleet and which nodes the later profile
    shares with it, the later one starts either on every targeted node or on none, and on none
    exactly when the earlier one is incomplete on one of its nodes."""
    nodes = fleet(len(standings))
    for node, standing, both in zip(nodes, standings, shared, strict=False):
        node["metadata"]["labels"]["infra"] = "yes"
        node["metadata"]["labels"][GROUP] = "shared" if both else "other"
        if standing != "none":
            node["metadata"]["annotations"].update(record(profile("infra", 50), failed=standing == "failed"))
    infra = profile("infra", 50)
    infra = NodeProfile.model_validate(
        {
            **infra.model_dump(mode="json", by_alias=True, exclude_none=True),
            "spec": {
                **infra.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
                "allNodes": False,
                "nodeSelector": {"matchLabels": {"infra": "yes"}},
            },
        }
    )
    tuning = profile("tuning", 200, sequencing="all", group="shared")
    targeted = [n for n, both in zip(nodes, shared, strict=False) if both]
    blocked = turn(tuning, nodes, [infra, tuning])
    if not targeted:
        return
    if all(s == "complete" for s in standings):
        assert blocked == {}
    else:
        assert set(blocked) == {name(n) for n in targeted}
        failed = any(s == "failed" for s in standings)
        assert all(r.startswith("EarlierProfileFailed" if failed else "WaitingFor") for r in blocked.values())
