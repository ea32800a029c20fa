"""A campaign stage's fleet gate, pure (``planner.campaigngate`` through ``planner.campaign``):
measured in each cluster of the stage once all completed, on each check's schedule; the next stage
(after the last: completion) waits for the soak and every check; an Inconclusive check or
Prometheus not answering holds (a human's approval passes the hold), a Failed one fires the
failure rule, a resume measures the gate again from the start."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fleetwright.api.campaign import CampaignSpec
from fleetwright.planner.campaign import (
    CampaignDecision,
    CampaignPhase,
    CampaignState,
    approve,
    decide,
    record,
    resume,
)
from fleetwright.planner.health.analysis import CheckPhase, Measurement
from tests.support.campaigns import DONE, T0, spec

pytestmark = pytest.mark.unit

CHECK = {"name": "xid", "query": 'sum(x{n=~"{{nodes}}"})', "successCondition": "result[0] == 0", "count": 2}


def gated(stages: list[dict[str, Any]], **check: Any) -> CampaignSpec:
    plain = spec(stages)
    return CampaignSpec.model_validate(
        plain.model_dump(by_alias=True, exclude_none=True) | {"healthChecks": [CHECK | check]}
    )


GATED = gated(
    [{"name": "canary", "clusters": ["a", "b"], "checks": ["xid"]}, {"name": "rest", "clusters": ["c"]}]
)
ALL_DONE = {"a": DONE, "b": DONE}


def at_gate(campaign: CampaignSpec = GATED) -> CampaignDecision:
    """The canary stage complete at T0: its gate begins."""
    started = decide(campaign, CampaignState(), {}, paused=False, now=T0).state
    return decide(campaign, started, ALL_DONE, paused=False, now=T0)


def measured(
    campaign: CampaignSpec, decision: CampaignDecision, phase: CheckPhase, *, seconds: float, value: float = 0
) -> CampaignDecision:
    """Every due measurement taken ``seconds`` after T0 with ``phase``, and the next decision."""
    now = T0 + timedelta(seconds=seconds)
    state = decision.state
    for request in decision.measure:
        taken = Measurement(check=request.check.name, phase=phase, value=value)
        state = record(campaign, state, request.cluster, taken, now)
    return decide(campaign, state, ALL_DONE, paused=False, now=now)


def test_each_cluster_of_the_stage_is_measured_and_the_next_stage_waits_for_every_check() -> None:
    gate = at_gate()
    assert gate.phase == CampaignPhase.WAITING
    assert [(r.cluster, r.check.name) for r in gate.measure] == [("a", "xid"), ("b", "xid")]
    assert gate.start == ()
    once = measured(GATED, gate, CheckPhase.SUCCESSFUL, seconds=0)
    assert once.measure == ()  # the next one interval (30 s) on
    assert once.wake_at == T0 + timedelta(seconds=30)
    assert "stage canary's fleet gate Running: a: xid Running (1/2" in once.message, once.message
    twice = measured(
        GATED,
        decide(GATED, once.state, ALL_DONE, paused=False, now=once.wake_at),
        CheckPhase.SUCCESSFUL,
        seconds=30,
    )
    assert twice.start == ("c",)
    assert twice.state.gate == ()  # the next stage starts with no gate of its own


def test_a_failed_check_in_one_cluster_fires_the_failure_rule() -> None:
    failed = measured(GATED, at_gate(), CheckPhase.FAILED, seconds=0, value=2)
    assert failed.phase == CampaignPhase.HALTED
    assert failed.hold
    assert failed.message.startswith("stage canary's fleet gate Failed: a: xid Failed"), failed.message
    assert failed.start == ()
    rollback = GATED.model_copy(update={"failure": GATED.failure.model_copy(update={"action": "rollback"})})
    rolled = measured(rollback, at_gate(rollback), CheckPhase.FAILED, seconds=0, value=2)
    assert rolled.phase == CampaignPhase.ROLLING_BACK
    assert rolled.rollback == rolled.message
    # A resume measures the gate again from the start.
    again = decide(GATED, resume(failed.state), ALL_DONE, paused=False, now=T0 + timedelta(minutes=5))
    assert again.phase == CampaignPhase.WAITING
    assert [r.cluster for r in again.measure] == ["a", "b"]


def test_prometheus_not_answering_holds_named_never_fails_and_approval_passes_the_hold() -> None:
    flaky = gated(GATED.model_dump(by_alias=True)["stages"], consecutiveErrorLimit=0)
    held = measured(flaky, at_gate(flaky), CheckPhase.ERROR, seconds=0)
    assert held.phase == CampaignPhase.WAITING
    assert "fleet gate MonitoringUnavailable: a: xid MonitoringUnavailable" in held.message, held.message
    assert "(fleetwright campaign approve NAME canary)" in held.message
    later = decide(flaky, held.state, ALL_DONE, paused=False, now=T0 + timedelta(hours=6))
    assert later.phase == CampaignPhase.WAITING  # still measuring, every interval
    assert [r.cluster for r in later.measure] == ["a", "b"]
    passed = decide(
        flaky, approve(flaky, later.state, "canary"), ALL_DONE, paused=False, now=later.wake_at or T0
    )
    assert passed.start == ("c",)


def test_an_inconclusive_check_waits_for_the_stages_approval() -> None:
    unsure = measured(GATED, at_gate(), CheckPhase.INCONCLUSIVE, seconds=0)
    assert unsure.phase == CampaignPhase.WAITING
    assert "fleet gate Inconclusive" in unsure.message
    assert decide(GATED, approve(GATED, unsure.state, "canary"), ALL_DONE, paused=False, now=T0).start == (
        "c",
    )


def test_the_soak_and_the_checks_both_hold_and_the_last_stages_gate_holds_completion() -> None:
    last = gated([{"name": "only", "clusters": ["a", "b"], "soakSeconds": 60, "checks": ["xid"]}], count=1)
    soaking = at_gate(last)
    assert soaking.phase == CampaignPhase.WAITING
    assert soaking.message.startswith("stage only soaks until"), soaking.message
    assert [r.cluster for r in soaking.measure] == ["a", "b"]  # measured during the soak
    checked = measured(last, soaking, CheckPhase.SUCCESSFUL, seconds=1)
    assert checked.phase == CampaignPhase.WAITING  # the soak still runs
    once_more = gated(
        [{"name": "only", "clusters": ["a", "b"], "soakSeconds": 60, "checks": ["xid"]}], count=2
    )
    first = measured(once_more, at_gate(once_more), CheckPhase.SUCCESSFUL, seconds=1)
    assert first.wake_at == T0 + timedelta(seconds=31)  # the next measurement, within the soak
    done = decide(last, checked.state, ALL_DONE, paused=False, now=T0 + timedelta(seconds=60))
    assert done.phase == CampaignPhase.COMPLETE
