"""The mechanics every long activity shares: blocking Kubernetes calls off the event loop, heartbeat
windows, and a bound that survives retries.

A wait's clock starts at its *first* attempt: the start time travels in the heartbeat details, so
a worker crash mid-drain does not restart ``drain.timeoutSeconds``. It must not loop on errors
(Temporal retries); it only paces waits for a *state*.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from temporalio import activity
from temporalio.service import RPCError

from fleetwright.activities.payloads import NODES_CHANGED_SIGNAL

T = TypeVar("T")

MIN_WINDOW_SECONDS = 1.0
MAX_WINDOW_SECONDS = 10.0
DEFAULT_WINDOW_SECONDS = 5.0


def heartbeat_window() -> float:
    """How long one wait window may block: a third of the heartbeat timeout, within [1 s, 10 s]."""
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return DEFAULT_WINDOW_SECONDS
    return min(MAX_WINDOW_SECONDS, max(MIN_WINDOW_SECONDS, timeout.total_seconds() / 3))


class Clock:
    """Elapsed time of one wait since its first attempt, and its heartbeats."""

    def __init__(self, now: Callable[[], float] = time.time, *, started: float | None = None) -> None:
        """``started``: when the wait began, if something other than its first attempt says so."""
        self._now = now
        self.prior = _prior_details()
        first = self.prior.get("started")
        self.started = (
            started if started is not None else float(first) if isinstance(first, int | float) else now()
        )

    def elapsed(self) -> float:
        return max(0.0, self._now() - self.started)

    def remaining(self, bound_seconds: float) -> float:
        return bound_seconds - self.elapsed()

    def beat(self, **details: Any) -> None:
        activity.heartbeat({"started": self.started, **details})


def _prior_details() -> dict[str, Any]:
    details = activity.info().heartbeat_details
    if details and isinstance(details[0], dict):
        return dict(details[0])
    return {}


async def tell_rollout(workflow_id: str) -> None:
    """Ask the rollout to re-observe its nodes now: a wait that starts or stops holding a node shows
    in its progress at once, not at its next observe interval. Best effort (the interval still
    catches it): a rollout that ended or cannot be reached is not this activity's failure."""
    if not workflow_id:
        return
    try:
        await activity.client().get_workflow_handle(workflow_id).signal(NODES_CHANGED_SIGNAL)
    except RPCError as error:
        activity.logger.info("could not tell %s about a held wait: %s", workflow_id, error)


async def blocking(executor: Executor, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking Kubernetes call on ``executor``; a cancelled activity stops awaiting at once
    (the thread finishes its bounded call and its result is dropped)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, functools.partial(call, *args, **kwargs))
