"""How long the rollout sleeps between turns, and what wakes it: a node report, a human, a spec or
node change (the controller signals those), the decision's own wake-up time, the observe interval
while the fleet can change the decision, or the periodic look for ended node workflows; and the
pacing that keeps back-to-back turns from spending a core on observing alone."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow

from fleetwright.workflows.noderuns import collect_ended, ended_check
from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.planner.rollout.state import Decision


async def sleep(run: RolloutRun, decision: Decision) -> None:
    """Wait for a node report, a human, a spec or node change (the controller signals those),
    or the decision's own wake-up time. Only while the planner says something outside the
    rollout can change its decision (``Decision.watch_fleet``: blocked nodes, budget held by
    others, a soak health gate, nodes running for an earlier target) does it also re-observe on
    the interval. While its own nodes run it looks for ended node workflows every
    ``ended_check_seconds`` without a turn of its own, unless it finds one; a gate, a halt or a
    finished rollout waits on one timer or none, so a canary gate can hold for days on a single
    timer."""
    # A spec change or deletion signalled while this turn's activity ran must not wait for the
    # next timer (a finished rollout has none).
    if run.new_spec is not None:
        return
    while True:
        checking = bool(decision.state.running or decision.state.running_for_earlier_target)
        timeout, turn = _sleep_bound(run, decision, checking)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: bool(run.results) or run.decide_now, timeout=timeout)
            break
        if turn or await collect_ended(run):
            break
    await _pace(run)


def _sleep_bound(run: RolloutRun, decision: Decision, checking: bool) -> tuple[timedelta | None, bool]:
    """How long to sleep at most, and whether waking then is a turn (else it is the look for
    ended node workflows only)."""
    bounds: list[tuple[timedelta, bool]] = []
    now = workflow.now()
    if decision.wake_at is not None:
        bounds.append((max(decision.wake_at - now, timedelta(seconds=1)), True))
    if decision.watch_fleet:
        bounds.append((timedelta(seconds=run.settings.observe_interval_seconds), True))
    if checking:
        assert run.ended_checked_at is not None
        due = run.ended_checked_at + ended_check(run) - now
        bounds.append((max(due, timedelta(seconds=1)), False))
    if not bounds:
        return None, True
    return min(bounds, key=lambda bound: (bound[0], not bound[1]))


async def _pace(run: RolloutRun) -> None:
    """A turn woken by node reports starts no sooner than the last turn's own duration after it
    ended. Each turn reads every Node: at 10,000 nodes that is seconds of apiserver and worker
    CPU, and with reports arriving all the time back-to-back turns would spend a core on
    observing alone; spaced, observing takes at most half the time, and a slow turn (a loaded
    apiserver) spaces the next one further, by at most the observe interval: a turn whose
    activity outlived a lost worker (its start-to-close timeout, then a retry) was not slow to
    observe. A human's signal or a spec change does not wait."""
    if run.decide_now or run.last_turn is None:
        return
    asked, answered = run.last_turn
    took, bound = answered - asked, timedelta(seconds=run.settings.observe_interval_seconds)
    # patch pace-bounded: since 0.3; deprecate_patch in 0.4, remove in 0.5
    if took > bound and workflow.patched("pace-bounded"):
        took = bound
    resume = answered + took
    if resume <= workflow.now():
        return
    with contextlib.suppress(TimeoutError):
        await workflow.wait_condition(lambda: run.decide_now, timeout=resume - workflow.now())
