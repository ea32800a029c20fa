"""The campaign's pure core (``planner.campaign``): stages in order, clusters of a stage at most
``maxParallel`` at once, a stage's soak and approval before the next, and the one failure rule
over every cluster's failed nodes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwright.planner.campaign import (
    CampaignPhase,
    CampaignState,
    ClusterReport,
    approve,
    decide,
    resume,
    retarget,
)
from tests.support.campaigns import DONE, RUNNING, T0, spec

pytestmark = pytest.mark.unit

THREE = spec(
    [
        {"name": "canary", "clusters": ["a"], "soakSeconds": 3600, "approval": True},
        {"name": "rest", "clusters": ["b", "c", "d"], "maxParallel": 2},
    ]
)


def test_the_first_stage_starts_alone_and_the_next_waits_for_its_soak_then_approval() -> None:
    first = decide(THREE, CampaignState(), {}, paused=False, now=T0)
    assert first.start == ("a",)
    assert first.phase == CampaignPhase.PROGRESSING
    again = decide(THREE, first.state, {"a": RUNNING}, paused=False, now=T0)
    assert again.start == ()  # started once
    soaking = decide(THREE, again.state, {"a": DONE}, paused=False, now=T0)
    assert soaking.phase == CampaignPhase.WAITING
    assert soaking.wake_at == T0 + timedelta(hours=1)
    later = T0 + timedelta(hours=1)
    gated = decide(THREE, soaking.state, {"a": DONE}, paused=False, now=later)
    assert "waiting for approval" in gated.message
    assert gated.wake_at is None
    assert gated.start == ()
    approved = approve(THREE, gated.state, "canary")
    going = decide(THREE, approved, {"a": DONE}, paused=False, now=later)
    assert going.start == ("b", "c")  # maxParallel 2
    third = decide(THREE, going.state, {"a": DONE, "b": DONE, "c": RUNNING}, paused=False, now=later)
    assert third.start == ("d",)
    done = dict.fromkeys("abcd", DONE)
    assert decide(THREE, third.state, done, paused=False, now=later).phase == CampaignPhase.COMPLETE


def test_failed_nodes_count_over_every_cluster_and_hold_until_resumed() -> None:
    rule = spec([{"name": "all", "clusters": ["a", "b"]}], max_failed=1)
    state = decide(rule, CampaignState(), {}, paused=False, now=T0).state
    one = {"a": ClusterReport(phase="Progressing", failed=1), "b": RUNNING}
    assert not decide(rule, state, one, paused=False, now=T0).hold
    two = {**one, "b": ClusterReport(phase="Progressing", failed=1)}
    halted = decide(rule, state, two, paused=False, now=T0)
    assert halted.hold
    assert halted.phase == CampaignPhase.HALTED
    assert halted.message == "2 failed nodes over the clusters (a: 1, b: 1), more than maxFailedNodes 1"
    # Held even once the counts drop (a node retried), until a human resumes.
    assert decide(rule, halted.state, one, paused=False, now=T0).hold
    assert not decide(rule, resume(halted.state), one, paused=False, now=T0).hold


def test_a_halt_starts_no_cluster_of_a_later_stage() -> None:
    failed = {"a": ClusterReport(phase="Halted", failed=1)}
    state = decide(THREE, CampaignState(), {}, paused=False, now=T0).state
    halted = decide(THREE, approve(THREE, state, "canary"), failed, paused=False, now=T0 + timedelta(days=1))
    assert halted.start == ()
    assert halted.hold


def test_a_cluster_not_heard_from_is_never_counted_failed() -> None:
    state = decide(THREE, CampaignState(), {}, paused=False, now=T0).state
    silent = decide(THREE, state, {}, paused=False, now=T0)
    assert not silent.hold
    assert silent.phase == CampaignPhase.PROGRESSING


def test_approving_an_unknown_stage_names_the_stages() -> None:
    with pytest.raises(ValueError, match="no such stage \\(stages: canary, rest\\)"):
        approve(THREE, CampaignState(), "nope")


def test_a_cluster_in_no_stage_or_two_is_refused() -> None:
    with pytest.raises(ValueError, match="every member cluster in exactly one stage"):
        spec([{"name": "one", "clusters": ["a"]}, {"name": "two", "clusters": ["a"]}])


@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    parallel=st.integers(1, 4),
)
def test_clusters_start_stage_by_stage_never_more_than_max_parallel_at_once(
    sizes: list[int], parallel: int
) -> None:
    names = iter(f"c{i}" for i in range(sum(sizes)))
    stages: list[dict[str, Any]] = [
        {"name": f"s{i}", "clusters": [next(names) for _ in range(n)], "maxParallel": parallel}
        for i, n in enumerate(sizes)
    ]
    campaign = spec(stages)
    state, reports = CampaignState(), dict[str, ClusterReport]()
    order: list[str] = []
    for _ in range(4 * sum(sizes) + 2):
        decision = decide(campaign, state, reports, paused=False, now=T0)
        state = decision.state
        order += decision.start
        running = [c for c in state.started if reports.get(c, RUNNING) is not DONE]
        assert len(running) <= parallel
        if decision.phase == CampaignPhase.COMPLETE:
            break
        for cluster in running[:1]:  # one cluster completes per turn
            reports[cluster] = DONE
        for cluster in decision.start:
            reports.setdefault(cluster, RUNNING)
    assert decision.phase == CampaignPhase.COMPLETE
    assert order == [c for s in stages for c in s["clusters"]]


def test_a_new_generation_starts_the_stages_over_and_an_earlier_report_is_not_complete() -> None:
    two = spec([{"name": "one", "clusters": ["a"], "approval": True}, {"name": "two", "clusters": ["b"]}])
    first = CampaignState(generation=1, stage=1, started=("a", "b"), approved=("one",))
    old = {n: ClusterReport(phase="Complete", generation=1) for n in "ab"}
    assert decide(two, first, old, paused=False, now=T0).phase == CampaignPhase.COMPLETE
    again = retarget(first, 2)
    assert again == CampaignState(generation=2)
    restart = decide(two, again, old, paused=False, now=T0)
    assert restart.start == ("a",)  # the first stage again; b's old Complete does not count
    assert restart.phase == CampaignPhase.PROGRESSING
    new = {**old, "a": ClusterReport(phase="Complete", generation=2)}
    gated = decide(two, restart.state, new, paused=False, now=T0)
    assert "waiting for approval" in gated.message  # the gate again
    assert retarget(again, 1) is again  # an older generation changes nothing


def test_with_action_rollback_every_started_cluster_returns_what_it_changed() -> None:
    rule = spec([{"name": "all", "clusters": ["a", "b"]}, {"name": "later", "clusters": ["c"]}])
    rule = rule.model_copy(update={"failure": rule.failure.model_copy(update={"action": "rollback"})})
    state = decide(rule, CampaignState(), {}, paused=False, now=T0).state
    failing = {"a": ClusterReport(phase="Halted", failed=1), "b": DONE}
    fired = decide(rule, state, failing, paused=False, now=T0)
    assert fired.phase == CampaignPhase.ROLLING_BACK
    assert (
        fired.rollback
        == fired.message
        == "1 failed nodes over the clusters (a: 1), more than maxFailedNodes 0"
    )
    assert not fired.hold  # a rollback must run: nothing is paused
    assert fired.start == ()  # no later stage starts
    returned = {"a": ClusterReport(phase="RolledBack", failed=1), "b": ClusterReport(phase="RolledBack")}
    assert decide(rule, fired.state, returned, paused=False, now=T0).phase == CampaignPhase.ROLLED_BACK


def test_a_new_generation_counts_only_its_own_failed_nodes() -> None:
    rule = spec([{"name": "all", "clusters": ["a", "b"]}])
    old = {"a": ClusterReport(phase="Halted", generation=1, failed=2), "b": RUNNING}
    halted = decide(rule, CampaignState(generation=1, started=("a", "b")), old, paused=False, now=T0)
    assert halted.phase == CampaignPhase.HALTED
    again = decide(rule, retarget(halted.state, 2), old, paused=False, now=T0)
    assert again.phase == CampaignPhase.PROGRESSING  # the fix the new generation carries runs
    assert again.start == ("a", "b")
    failing = {**old, "a": ClusterReport(phase="Progressing", generation=2, failed=1)}
    assert decide(rule, again.state, failing, paused=False, now=T0).phase == CampaignPhase.HALTED
