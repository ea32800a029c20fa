"""The one way a test waits: poll a probe until it returns something truthy (and return that), or
fail naming what was awaited. Never a fixed sleep: a loaded CI machine takes longer, not a
different path.

``wait_for`` polls from synchronous code; ``until`` from a test's event loop, awaiting a probe
that returns an awaitable and running a plain one on a thread (``blocking``, the default: kubectl
and API reads must not stall an in-process worker or controller) or inline (``blocking=False``:
cheap reads of in-memory state that the loop's own tasks change). ``until_progress`` waits for a
rollout workflow's published progress to show something, ``until_phase`` for one of its phases.
``until_fleet``, ``until_complete`` and ``until_grown`` wait on a workflow-tier fake fleet's in-memory state.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping, Sized
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.local.processes import wait_until
from fleetwright.workflows.payloads import Progress
from fleetwright.workflows.rollout import RolloutWorkflow


def wait_for(
    probe: Callable[[], Any],
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.2,
    alive: Callable[[], None] | None = None,
    details: Callable[[], object] | None = None,
) -> Any:
    """Poll ``probe`` until it returns something truthy (and return that), or fail naming ``what``
    (``TimeoutError``); ``alive`` raises when what is awaited died; ``details`` adds what to print
    on a timeout, as ``until``'s does. The local stack's own poller
    (``local.processes.wait_until``), called positionally."""
    try:
        return wait_until(probe, timeout=timeout, what=what, interval=interval, alive=alive)
    except TimeoutError as error:
        if details is None:
            raise
        raise TimeoutError(f"{error} ({details()})") from None


async def until(
    probe: Callable[[], Any],
    within: float,
    what: str,
    *,
    interval: float = 0.2,
    blocking: bool = True,
    details: Callable[[], object] = lambda: "",
) -> Any:
    """``wait_for`` from the event loop, failing as it does (``TimeoutError`` naming ``what``);
    ``details`` adds what to print on a timeout."""
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = (
            probe() if inspect.iscoroutinefunction(probe) or not blocking else await asyncio.to_thread(probe)
        )
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {within:.0f}s waiting for {what} (last: {last}; {details()})")


async def until_fleet(
    probe: Callable[[], Any], what: str, within: float = 30.0, details: Callable[[], object] = lambda: ""
) -> Any:
    """``until`` over a fake fleet's in-memory state, which the worker's tasks on this loop change:
    polled inline and often."""
    return await until(probe, within, what, interval=0.05, blocking=False, details=details)


async def until_grown(items: Sized, by: int, what: str, within: float = 30.0) -> None:
    """Until ``items`` (a fake fleet's record, which its worker appends to) holds ``by`` more than
    it does now."""
    before = len(items)
    await until_fleet(lambda: len(items) >= before + by, what, within)


async def until_complete(statuses: Mapping[str, str], count: int, what: str, within: float = 30.0) -> None:
    """Until exactly ``count`` of the nodes' ``statuses`` (a fake fleet's) show Complete."""
    await until_fleet(lambda: list(statuses.values()).count("Complete") == count, what, within)


async def query_progress(handle: WorkflowHandle[RolloutWorkflow, Progress]) -> Progress | None:
    """The rollout's progress query (None before its first turn). A query is answered by the
    worker; on a loaded CI machine the test server's query deadline can pass, so a timed-out query
    is asked again (a few times)."""
    for _ in range(4):
        try:
            return await handle.query(RolloutWorkflow.progress)
        except RPCError as error:
            if error.status is not RPCStatusCode.DEADLINE_EXCEEDED:
                raise
    raise AssertionError("the progress query timed out four times")


async def until_progress(
    handle: WorkflowHandle[RolloutWorkflow, Progress],
    predicate: Callable[[Progress], bool],
    what: str,
    within: float = 60.0,
) -> Progress:
    """The first published progress that satisfies ``predicate`` (a rollout's turn can take seconds
    on a loaded machine: wait for what it shows, never for a fixed time)."""

    async def shown() -> Progress | None:
        state = await query_progress(handle)
        return state if state is not None and predicate(state) else None

    progress: Progress = await until(shown, within, f"the rollout to show {what}", interval=0.1)
    return progress


async def until_phase(
    handle: WorkflowHandle[RolloutWorkflow, Progress], *phases: str, within: float = 60.0
) -> Progress:
    """The first published progress in one of ``phases``."""
    return await until_progress(handle, lambda state: state.phase in phases, " or ".join(phases), within)
