"""A node's consecutive stages in one activity: each stage in order (its Job, its check, its
record on the Node), so the node workflow spends one workflow task on all of them instead of one
per stage.

Resumable: a retried attempt reads the Node's recorded state and starts after the last stage
whose record it finds there (each stage's Job is adopted by its deterministic name anyway, so no
stage ever gets a second Job). Cancellable between stages: a cancellation the node workflow asks
for (an abort) lets the running stage finish, as an abort always did, and starts no other; the
boundary asks the server directly rather than waiting for the next throttled heartbeat. Any other
cancellation (worker shutdown, heartbeat timeout) leaves at once: the retry adopts the Job.

Must not decide what runs on the node (the node workflow does); it runs what it was given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import AsyncActivityCancelledError

from fleetwright.activities.payloads import StageRequest, StagesReport, StagesRequest
from fleetwright.planner.node.state import format_annotation
from fleetwright.stagejob.outcome import StageReport

T = TypeVar("T")
RunStage = Callable[[StageRequest], Awaitable[StageReport]]


def resume_index(request: StagesRequest, recorded: str | None) -> int:
    """How many of the request's stages passed already: those up to the last one whose record is
    what the Node carries (``recorded``: the profile's state annotation, None when it has none)."""
    if recorded is None:
        return 0
    for index in range(len(request.stages) - 1, -1, -1):
        record = request.stages[index].record
        if record is not None and format_annotation(record)[1] == recorded:
            return index + 1
    return 0


async def run_stages(request: StagesRequest, run_stage: RunStage, resumed: int = 0) -> StagesReport:
    """Run ``request``'s stages from index ``resumed`` with ``run_stage``, up to the first that
    fails or until the node workflow cancels this activity."""
    reports: list[StageReport] = []
    for index in range(resumed, len(request.stages)):
        if index > resumed and await _cancel_requested({"passed": index}):
            return StagesReport(resumed=resumed, reports=tuple(reports), stopped=True)
        report, cancelled = await _finishing(run_stage(request.stages[index]))
        reports.append(report)
        if cancelled or not report.succeeded:
            return StagesReport(resumed=resumed, reports=tuple(reports), stopped=cancelled)
    return StagesReport(resumed=resumed, reports=tuple(reports))


async def _finishing(work: Awaitable[T]) -> tuple[T, bool]:
    """``work``'s result, and whether the node workflow asked to cancel meanwhile: that request
    lets the running stage finish; any other cancellation propagates."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            return await asyncio.shield(task), cancelled
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if task.done() or details is None or not details.cancel_requested:
                task.cancel()
                raise
            cancelled = True
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()


async def _cancel_requested(details: Any) -> bool:
    """Whether the node workflow asked to cancel this activity: known to the worker already, or
    answered by a heartbeat sent now (the worker's own heartbeats are throttled)."""
    if activity.is_cancelled():
        return True
    info = activity.info()
    handle = activity.client().get_async_activity_handle(task_token=info.task_token)
    try:
        await handle.heartbeat(details)
    except AsyncActivityCancelledError:
        return True
    return False
