"""One turn of the rollout: fold in the node reports and the humans' retries, and ask the
observe-and-decide activity (which reads the fleet and runs the pure planner) for the decision.
A pause or abort that arrives while the activity runs voids that decision's starts: the turn is
decided again under the new controls."""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.rollout import RolloutActivities
    from fleetwright.workflows import retry
    from fleetwright.workflows.payloads import Controls, DecideReport, DecideRequest, NodeResult


async def observe_and_decide(run: RolloutRun) -> DecideReport:
    assert run.state is not None
    retried = _take_retried(run)
    ended, run.ended = tuple(run.ended), []
    reported: list[NodeResult] = []
    unclaim: tuple[str, ...] = ()
    while True:
        reported, run.results = reported + run.results, []
        controls = run.controls
        request = DecideRequest(
            now=workflow.now(),
            profile=run.profile,
            state=run.state,
            results=tuple(reported),
            controls=controls,
            reset_failed=retried,
            release_claims=unclaim,
            ended=ended,
        )
        report = await _decide(run, request)
        # A pause or abort that arrived while the activity ran: the decision was taken without
        # it, so its starts must not happen (a node started after a handled pause). Decide again
        # from the same state under the new controls, dropping the claims this decision wrote.
        if not (report.decision.start and _stopped_since(controls, run.controls)):
            return report
        unclaim = tuple(s.node for s in report.decision.start)


def _take_retried(run: RolloutRun) -> tuple[str, ...]:
    """The nodes a human retried or skipped since the last turn: their failures leave the state
    (and a halt they caused with them)."""
    assert run.state is not None
    retried, run.retry = tuple(run.retry), []
    if retried:
        failed = tuple(f for f in run.state.failed if f.node not in retried)
        run.state = run.state.model_copy(update={"failed": failed, "halt": None})
    return retried


async def _decide(run: RolloutRun, request: DecideRequest) -> DecideReport:
    # Cleared as the turn asks, not as it goes to sleep: a signal that arrives while the
    # activity runs (a node change, a human) was not seen by it and wakes the next turn at once.
    run.decide_now = False
    asked = workflow.now()
    report = await workflow.execute_activity_method(
        RolloutActivities.observe_and_decide,
        request,
        # One list and a pure decision (about a second at 10,000 nodes): the bound is how long a
        # worker lost mid-call stalls the rollout before another attempt.
        start_to_close_timeout=retry.API_CALL_TIMEOUT,
        retry_policy=retry.API_CALL,
        summary=f"observe the nodes of {run.profile.metadata.name} and decide the next turn",
    )
    run.last_turn = (asked, workflow.now())
    return report


def _stopped_since(before: Controls, now: Controls) -> bool:
    """A pause or an abort was received after ``before`` was sent to the planner."""
    return (now.paused and not before.paused) or (now.aborted and not before.aborted)
