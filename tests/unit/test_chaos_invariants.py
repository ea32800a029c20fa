"""The chaos suite's invariant checks: each holds on a clean timeline and fires on a violating one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwright.api.keys import claim_key, condition_type, cordon_key, state_key
from fleetwright.chaos import invariants as inv
from fleetwright.chaos.snapshot import Snapshot, snapshot

pytestmark = pytest.mark.unit

P = "chaos-p"


def node(name: str, *, ours: bool = False, cordoned: bool = False, **extra: Any) -> dict[str, Any]:
    annotations = dict(extra.pop("annotations", {}))
    if ours:
        annotations[cordon_key(P)] = "true"
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"unschedulable": cordoned or ours, "taints": extra.pop("taints", [])},
        "status": {"conditions": extra.pop("conditions", [])},
    }


def working_state(failed: str | None = None) -> dict[str, str]:
    pending = {"version": "1.0.0", "stages": ["apply"], "done": [], "failed": failed}
    state = {"v": 1, "profile": P, "packages": {"tuning": {"version": None, "pending": pending}}}
    return {state_key(P): json.dumps(state)}


def job(uid: str, node_name: str = "n1", stage: str = "apply", generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "name": f"fw-{uid}",
            "labels": {
                "fleetwright.io/profile": P,
                "fleetwright.io/package": "tuning",
                "fleetwright.io/stage": stage,
            },
            "annotations": {
                "fleetwright.io/node-name": node_name,
                "fleetwright.io/package-version": "1.0.0",
                "fleetwright.io/generation": str(generation),
            },
        }
    }


def profile(
    phase: str, *, blocked: str = "", failed: tuple[str, ...] = (), generation: int = 1
) -> dict[str, Any]:
    conditions = [
        {
            "type": "Ready",
            "status": "True" if phase == "Complete" else "False",
            "reason": "R",
            "message": "m",
        },
        {
            "type": "Blocked",
            "status": "True" if blocked else "False",
            "reason": "NodesBlocked",
            "message": blocked,
        },
    ]
    if phase in ("Halted", "Degraded"):
        conditions.append(
            {"type": "Degraded", "status": "True", "reason": "RolloutHalted", "message": "halted"}
        )
    return {
        "metadata": {"generation": generation},
        "status": {
            "phase": phase,
            "observedGeneration": 1,
            "conditions": conditions,
            "nodeIssues": [{"node": n, "reason": "StageFailed"} for n in failed],
        },
    }


def snap(at: float, nodes: list[dict[str, Any]], **kw: Any) -> Snapshot:
    return snapshot(at, nodes, **kw)


# ----- budget -------------------------------------------------------------------------------------
def test_budget_holds_at_the_cap() -> None:
    timeline = [snap(0, [node("a", ours=True), node("b", annotations=working_state()), node("c")])]
    assert inv.budget(timeline, P, 2) == []


def test_budget_fires_once_per_breach_and_counts_work_without_a_cordon() -> None:
    over = [node("a", ours=True), node("b", annotations=working_state()), node("c", ours=True)]
    timeline = [snap(0, over), snap(1, over), snap(2, [node("a"), node("b"), node("c")])]
    found = inv.budget(timeline, P, 2)
    assert [v.invariant for v in found] == [inv.BUDGET]
    assert "a, b, c" in found[0].detail


def test_budget_ignores_foreign_cordons_and_failed_work() -> None:
    nodes = [
        node("a", cordoned=True),
        node("b", annotations=working_state(failed="boom")),
        node("c", ours=True),
    ]
    assert inv.budget([snap(0, nodes)], P, 1) == []


# ----- foreign cordons ----------------------------------------------------------------------------
def test_foreign_cordon_kept_is_fine_and_our_own_release_is_fine() -> None:
    timeline = [
        snap(0, [node("a", cordoned=True), node("b", ours=True)]),
        snap(1, [node("a", cordoned=True), node("b")]),
    ]
    assert inv.foreign_cordons(timeline) == []


def test_foreign_cordon_released_fires() -> None:
    timeline = [snap(0, [node("a", cordoned=True)]), snap(1, [node("a", ours=True)]), snap(2, [node("a")])]
    found = inv.foreign_cordons(timeline)
    assert [v.invariant for v in found] == [inv.FOREIGN_CORDON]
    assert found[0].at == 2


def test_a_foreign_cordon_its_owner_released_is_fine_but_not_before_the_release() -> None:
    timeline = [snap(0, [node("a", cordoned=True)]), snap(5, [node("a")])]
    assert inv.foreign_cordons(timeline, released={"a": 4.0}) == []
    assert [v.invariant for v in inv.foreign_cordons(timeline, released={"a": 6.0})] == [inv.FOREIGN_CORDON]


# ----- duplicate jobs -----------------------------------------------------------------------------
def test_the_same_job_seen_twice_is_one_job() -> None:
    timeline = [snap(0, [], jobs=[job("u1")]), snap(1, [], jobs=[job("u1"), job("u2", stage="config")])]
    assert inv.duplicate_jobs(timeline, P) == []


def test_a_recreated_job_fires() -> None:
    timeline = [snap(0, [], jobs=[job("u1")]), snap(1, [], jobs=[job("u2")])]
    found = inv.duplicate_jobs(timeline, P)
    assert [v.invariant for v in found] == [inv.DUPLICATE_JOB]
    assert "n1 tuning@1.0.0 apply" in found[0].detail


def test_a_new_generation_is_a_new_job() -> None:
    timeline = [snap(0, [], jobs=[job("u1"), job("u2", generation=2)])]
    assert inv.duplicate_jobs(timeline, P) == []


# ----- rollout ended ------------------------------------------------------------------------------
@pytest.mark.parametrize("phase", ["Complete", "Halted", "Degraded"])
def test_final_phases_with_reasons_are_ended(phase: str) -> None:
    final = snap(0, [], profile=profile(phase)).profile
    assert inv.rollout_ended(final, 0) == []


@pytest.mark.parametrize("phase", ["Progressing", "Blocked", "Paused", "Pending", ""])
def test_a_rollout_still_going_fires(phase: str) -> None:
    final = snap(0, [], profile=profile(phase)).profile
    assert [v.invariant for v in inv.rollout_ended(final, 0)] == [inv.ENDED]


def test_a_halt_without_a_reason_or_an_old_generation_fires() -> None:
    silent = profile("Halted")
    silent["status"]["conditions"] = [c for c in silent["status"]["conditions"] if c["type"] != "Degraded"]
    assert inv.rollout_ended(snap(0, [], profile=silent).profile, 0)
    assert inv.rollout_ended(snap(0, [], profile=profile("Complete", generation=2)).profile, 0)
    assert inv.rollout_ended(None, 0)


# ----- left behind --------------------------------------------------------------------------------
def test_clean_end_and_a_failed_node_kept_cordoned_are_fine() -> None:
    final = snap(
        9,
        [node("a"), node("b", ours=True), node("c", cordoned=True)],
        profile=profile("Halted", failed=("b",)),
    )
    assert inv.left_behind(final, P) == []


def test_cordon_marker_claim_or_taint_left_behind_fires() -> None:
    nodes = [
        node("a", ours=True),
        node("b", annotations={cordon_key(P): "true"}),
        node("c", taints=[{"key": "fleetwright.io/runtime-required", "effect": "NoSchedule"}]),
        node("d", annotations={claim_key(P): "true"}),
        node("e", annotations={claim_key("another-profile"): "true"}),  # not this rollout's
    ]
    found = inv.left_behind(snap(9, nodes, profile=profile("Complete")), P)
    assert [v.detail.split()[0] for v in found] == ["a", "b", "c", "d"]


def test_a_failed_node_may_stay_cordoned_but_not_claimed() -> None:
    failed = node("b", ours=True, annotations={claim_key(P): "true"})
    found = inv.left_behind(snap(9, [failed], profile=profile("Halted", failed=("b",))), P)
    assert [v.detail for v in found] == ["b left claimed (its start claim)"]


# ----- blocked waits visible ----------------------------------------------------------------------
def pulling(node_name: str) -> dict[str, Any]:
    waiting = {"state": {"waiting": {"reason": "ImagePullBackOff"}}}
    return {
        "metadata": {"name": "p", "labels": {"job-name": "j"}},
        "spec": {"nodeName": node_name},
        "status": {"initContainerStatuses": [waiting]},
    }


def blocked_condition() -> list[dict[str, str]]:
    return [{"type": condition_type(P), "status": "False", "reason": "ImagePullFailed"}]


def test_a_pull_wait_shown_in_time_is_fine() -> None:
    timeline = [
        snap(0, [node("a")], pods=[pulling("a")]),
        snap(20, [node("a", conditions=blocked_condition())], pods=[pulling("a")]),
        snap(40, [node("a", conditions=blocked_condition())]),
    ]
    assert inv.blocked_visible(timeline, P) == []


def test_a_pull_wait_named_by_the_profile_is_fine() -> None:
    timeline = [
        snap(0, [node("a")], pods=[pulling("a")]),
        snap(10, [node("a")], pods=[pulling("a")], profile=profile("Blocked", blocked="a: cannot pull")),
        snap(40, [node("a")]),
    ]
    assert inv.blocked_visible(timeline, P) == []


def test_a_silent_pull_wait_fires() -> None:
    timeline = [
        snap(0, [node("a")], pods=[pulling("a")]),
        snap(31, [node("a")], pods=[pulling("a")]),
        snap(60, [node("a")]),
    ]
    found = inv.blocked_visible(timeline, P)
    assert [v.invariant for v in found] == [inv.BLOCKED_VISIBLE]


def test_an_outage_extends_the_bound() -> None:
    timeline = [
        snap(0, [node("a")], pods=[pulling("a")]),
        snap(50, [node("a", conditions=blocked_condition())]),
        snap(80, [node("a")]),
    ]
    assert inv.blocked_visible(timeline, P) != []
    assert inv.blocked_visible(timeline, P, outages=[(5.0, 25.0)]) == []


def test_check_run_collects_everything() -> None:
    timeline = [
        snap(0, [node("a", cordoned=True), node("b", ours=True), node("c", ours=True)], jobs=[job("u1")]),
        snap(
            1, [node("a"), node("b", ours=True), node("c")], jobs=[job("u2")], profile=profile("Progressing")
        ),
    ]
    found = {v.invariant for v in inv.check_run(timeline, P, max_unavailable=1)}
    assert found == {inv.BUDGET, inv.FOREIGN_CORDON, inv.DUPLICATE_JOB, inv.ENDED, inv.LEFT_BEHIND}
    assert inv.check_run([], P, 1)[0].invariant == inv.ENDED


# ----- workloads interrupted once ------------------------------------------------------------------
GANG = {"Job/ml/run": frozenset({"a", "b"})}


def test_a_gang_drained_together_is_interrupted_once() -> None:
    timeline = [
        snap(0, [node("a"), node("b"), node("c")]),
        snap(1, [node("a", ours=True), node("b"), node("c")]),
        snap(2, [node("a", ours=True), node("b", ours=True), node("c")]),
        snap(3, [node("a"), node("b", annotations=working_state()), node("c")]),
        snap(4, [node("a"), node("b"), node("c", ours=True)]),
    ]
    assert inv.interrupted_once(timeline, P, 2, GANG) == []


def test_a_gang_drained_in_two_batches_fires() -> None:
    timeline = [
        snap(0, [node("a", ours=True), node("b")]),
        snap(1, [node("a"), node("b")]),
        snap(2, [node("a"), node("b", ours=True)]),
    ]
    (found,) = inv.interrupted_once(timeline, P, 2, GANG)
    assert found.invariant == inv.INTERRUPTED_ONCE
    assert found.at == 2
    assert "Job/ml/run (2 nodes, maxUnavailable 2) interrupted at 0.0s, 2.0s" in found.detail


def test_a_gang_larger_than_the_cap_or_on_a_failed_node_is_left_out() -> None:
    twice = [snap(0, [node("a", ours=True), node("b")]), snap(1, [node("a"), node("b", ours=True)])]
    assert inv.interrupted_once(twice, P, 1, GANG) == []
    failed = [
        *twice[:1],
        snap(2, [node("a"), node("b")]),
        snap(3, [node("b", ours=True)], profile=profile("Halted", failed=("b",))),
    ]
    assert inv.interrupted_once(failed, P, 2, GANG) == []
    assert inv.check_run(failed, P, 2, workloads=GANG) == inv.check_run(failed, P, 2)
