"""Why a node may not start now, whatever step asks: the node itself, the policy's
``workloadWait``, the budget, then the maintenance windows. A refusal that clears by itself at a
known time adds that time to the engine's wake-ups."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from fleetwright.planner.budget import Refusal
from fleetwright.planner.windows import next_fit

if TYPE_CHECKING:
    from fleetwright.planner.rollout.engine import Engine


def refusal(engine: Engine, node: str) -> Refusal | None:
    """Why ``node`` cannot start now: the node itself, the budget, then the windows."""
    reason = engine.view.node_refusal(node)
    if reason is not None:
        return Refusal(reason, waiting=False)
    return workload_refusal(engine, node) or engine.tracker.refusal(node) or _window_refusal(engine, node)


def workload_refusal(engine: Engine, node: str) -> Refusal | None:
    """The policy's ``workloadWait``: hold a node while the pods it waits for run there, up to
    its bound from when the node was first held (a durable timer: the decision wakes then).
    A held node holds no budget; a finished pod shows on a fresh observation."""
    wait = engine.policy.workload_wait
    pods = engine.view.nodes[node].finishing
    if wait is None or not pods:
        return None
    since = engine.held_since.setdefault(node, engine.now)
    until = since + timedelta(seconds=wait.timeout_seconds)
    if engine.now >= until:
        return None
    engine.waits.append(until)
    more = f" and {len(pods) - 2} more" if len(pods) > 2 else ""
    return Refusal(
        f"WaitingForWorkloads: {', '.join(pods[:2])}{more} running; at most until {until.isoformat()}",
        waiting=True,
        outside=True,
    )


def _window_refusal(engine: Engine, node: str) -> Refusal | None:
    if engine.window_left is None:
        return None
    seconds = engine.view.expected_seconds(node)
    if engine.window_left >= timedelta(seconds=seconds):
        return None
    if seconds not in engine.fit_cache:
        engine.fit_cache[seconds] = next_fit(engine.policy.windows, engine.now, seconds)
    opens = engine.fit_cache[seconds]
    if opens is None:
        return Refusal(f"NeverFits: needs {_minutes(seconds)}, longer than every window", waiting=False)
    engine.waits.append(opens)
    left = _minutes(int(engine.window_left.total_seconds()))
    reason = (
        f"OutsideWindow: needs {_minutes(seconds)}, {left} left in the open window; "
        f"next fit {opens.isoformat()}"
    )
    return Refusal(reason, waiting=True)


def _minutes(seconds: int) -> str:
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds % 60 else f"{seconds // 60}m"
