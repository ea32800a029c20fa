"""The runtime-required taint decided purely: which profiles taint a joining node, and which still
hold the taint on a node (it comes off only when none does)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import NodePackageState, PackageRecord, PendingChange, format_annotation
from fleetwright.planner.profile.runtime import holding_taint, taint_on_join

pytestmark = pytest.mark.unit

GPU = {"gpu": "h100"}


def profile(name: str, *, required: bool = True, auto: bool = True, deleting: bool = False) -> NodeProfile:
    body: dict[str, Any] = examples.profile(name, selector=GPU).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    body["spec"]["runtimeRequired"] = required
    body["spec"]["autoTaintNewNodes"] = auto and required
    if deleting:
        body["metadata"]["deletionTimestamp"] = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return NodeProfile.model_validate(body)


def recorded(p: NodeProfile, *, pending: bool = False, failed: str | None = None) -> dict[str, str]:
    desired = convert.package(p.spec.packages[0])
    record = PackageRecord(version=desired.version, config=dict(desired.config))
    if pending or failed:
        record = PackageRecord(
            pending=PendingChange(
                version=desired.version, config=dict(desired.config), stages=(Stage.APPLY,), failed=failed
            )
        )
    key, value = format_annotation(NodePackageState(profile=p.metadata.name, packages={"tuning": record}))
    return {key: value}


def test_a_joining_node_is_tainted_for_auto_tainting_runtime_profiles_that_target_it() -> None:
    a, b, c = profile("a"), profile("b", auto=False), profile("c", required=False)
    assert taint_on_join(GPU, {}, [c, b, a]) == ("a",)
    assert taint_on_join({"gpu": "other"}, {}, [a]) == ()


def test_a_node_with_recorded_state_is_not_tainted_again() -> None:
    a = profile("a")
    assert taint_on_join(GPU, recorded(a), [a]) == ()


def test_a_deleting_profile_neither_taints_nor_holds() -> None:
    a = profile("a", deleting=True)
    assert taint_on_join(GPU, {}, [a]) == ()
    assert holding_taint(GPU, {}, [a]) == ()


def test_the_taint_is_held_until_every_runtime_profile_is_complete_on_the_node() -> None:
    a, b, tuning = profile("a"), profile("b", auto=False), profile("t", required=False)
    assert holding_taint(GPU, {}, [a, b, tuning]) == ("a", "b")
    assert holding_taint(GPU, recorded(a), [a, b, tuning]) == ("b",)
    assert holding_taint(GPU, {**recorded(a), **recorded(b)}, [a, b, tuning]) == ()


def test_a_pending_or_failed_change_still_holds_the_taint() -> None:
    a = profile("a")
    assert holding_taint(GPU, recorded(a, pending=True), [a]) == ("a",)
    assert holding_taint(GPU, recorded(a, failed="apply: exit 1"), [a]) == ("a",)


def test_profiles_not_targeting_the_node_do_not_hold_it() -> None:
    assert holding_taint({"gpu": "other"}, {}, [profile("a")]) == ()
