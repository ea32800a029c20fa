"""Why a node may not start now, whatever step asks: the node itself, the policy's
``workloadWait``, the budget, then the maintenance windows; and why a workload unit (the nodes the
workload-aware order starts together) waits for one of its nodes. A refusal that clears by itself
at a known time adds that time to the engine's wake-ups."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from fleetwright.api.keys import ProfileReason
from fleetwright.planner.policy.windows import next_fit
from fleetwright.planner.rollout.budget import Refusal
from fleetwright.planner.rollout.working import WorkingSets

UNIT_WAIT = timedelta(minutes=30)
"""How long a workload unit waits for one of its nodes that cannot start (NotReady, busy) before it
starts without it: long enough for a reboot or another rollout's batch to end, short enough that a
node gone for good does not stall the rollout."""


def refusal(engine: WorkingSets, node: str) -> Refusal | None:
    """Why ``node`` cannot start now: the node itself, the budget, then the windows."""
    reason = engine.view.node_refusal(node)
    if reason is not None:
        return Refusal(reason, waiting=False)
    return workload_refusal(engine, node) or engine.tracker.refusal(node) or _window_refusal(engine, node)


def workload_refusal(engine: WorkingSets, node: str) -> Refusal | None:
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


def unit_refusal(engine: WorkingSets, unit: Sequence[str]) -> Refusal | None:
    """Why the workload unit ``unit`` (in order) waits: one of its nodes cannot start now (NotReady,
    busy with other work, held back by another profile). It waits up to ``UNIT_WAIT`` from when it
    first waited (a durable timer: the decision wakes then), then starts without that node, in a
    note. A waiting unit holds no budget; the node's recovery shows on a fresh observation."""
    first = unit[0]
    missing = {n: why for n in unit if (why := _unavailable(engine, n)) is not None}
    if not missing:
        engine.unit_since.pop(first, None)
        return None
    since = engine.unit_since.setdefault(first, engine.now)
    until = since + UNIT_WAIT
    names = ", ".join(missing)
    if engine.now >= until:
        if any(n in engine.pending and n not in missing for n in unit):
            waited = _minutes(int(UNIT_WAIT.total_seconds()))
            engine.notes.append(f"the workload unit of {first} starts without {names} after waiting {waited}")
        return None
    engine.waits.append(until)
    node, why = next(iter(missing.items()))
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return Refusal(
        f"{ProfileReason.WAITING_FOR_UNIT}: {node}{more} of its workload cannot start ({why}); "
        f"at most until {until.isoformat()}",
        waiting=True,
        outside=True,
    )


def _unavailable(engine: WorkingSets, node: str) -> str | None:
    """Why a node of a unit cannot start with it now; None when it can, or has nothing to do."""
    if node in engine.earlier:
        return "Busy: finishing an earlier target"
    if node in engine.pending:
        return engine.view.node_refusal(node)
    return None


def _window_refusal(engine: WorkingSets, node: str) -> Refusal | None:
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
