"""One ``decide`` call, and the ``Decision`` it returns.

``decide`` folds the outcomes in (``outcomes``), applies the failure rules (``failures``), walks
the steps (``walk``), turns a fired rollback rule into the rollback's first decision
(``lifecycle.begin_rollback``), and assembles the decision from what the engine found: the phase
and its message, the nodes held and why, the counts and when to call again.
"""

from __future__ import annotations

import heapq
from datetime import datetime

from fleetwright.planner.policy.windows import ensure_aware
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.failures import check_failures
from fleetwright.planner.rollout.lifecycle import begin_rollback
from fleetwright.planner.rollout.observations import Observations
from fleetwright.planner.rollout.outcomes import absorb
from fleetwright.planner.rollout.rollback import demanded_rollback, fires
from fleetwright.planner.rollout.state import (
    MAX_BLOCKED_LISTED,
    BlockedNode,
    Counts,
    Decision,
    Phase,
    RolloutState,
)
from fleetwright.planner.rollout.targets import FleetView, Prepared
from fleetwright.planner.rollout.walk import walk
from fleetwright.planner.rollout.working import MAX_STARTS_PER_DECISION


def decide(
    state: RolloutState,
    observations: Observations,
    now: datetime,
    prepared: Prepared | None = None,
    max_starts: int = MAX_STARTS_PER_DECISION,
) -> Decision:
    """The next decision. ``prepared`` (``Prepared(spec, observations)``) may be reused across calls
    while the nodes' names, labels and recorded package state are unchanged; it must have been built
    for ``state.spec``. At most ``max_starts`` nodes start per decision; a batch wider than that
    fills over the next decisions, the first a second later (``wake_at``).

    When a budget (profile-wide or a compartment's) refuses a start and only nodes this rollout
    failed on hold it, that scope's failure rule fires at once: no node it caps can ever start, so
    the rollout could never complete."""
    ensure_aware(now)
    if prepared is not None and prepared.spec.target != state.spec.target:
        raise ValueError("prepared was built for another spec target")
    view = FleetView(state.spec, observations, prepared)
    state = absorb(state, view)
    engine = Engine(state, view, observations, now, max_starts)
    if state.halt is None:
        state = check_failures(engine, state)
    state = demanded_rollback(state, observations.rollback, now)
    if state.halt is None and not observations.paused:
        state = walk(engine, state)
    if fires(state):
        # The failure rule fired with action rollback: from this very decision on, the rollout
        # returns what it changed (a new state toward the rollback's target, planned afresh).
        # A failure read from a node's record can come before its workflow's report: that node is
        # returned once its workflow has ended.
        unreported = view.reported_running.intersection(f.node for f in state.failed)
        rollback = begin_rollback(state, now, unreported)
        return decide(rollback, observations, now, max_starts=max_starts)
    if state.halt is not None:
        return _decision(engine, state, Phase.HALTED, _halted(state))
    if observations.paused:
        return _decision(engine, state, Phase.PAUSED, "paused")
    return _conclude(engine, state)


def _halted(state: RolloutState) -> str:
    assert state.halt is not None
    of = state.spec.rollback
    if of is None:
        return state.halt.reason
    return f"the rollback failed: {state.halt.reason} (it was rolling back: {of.reason})"


def _conclude(engine: Engine, state: RolloutState) -> Decision:
    _materialize_blocked(engine)
    if state.halt is not None:
        return _decision(engine, state, Phase.HALTED, _halted(state))
    policy, view = engine.policy, engine.view
    done = state.gates.step >= len(policy.gate_steps()) and all(
        s.step >= len(policy.compartment_steps(s.name)) for s in state.compartments
    )
    of = state.spec.rollback
    if done and not state.running and not state.running_for_earlier_target:
        # The same count as every status shows: targeted nodes that carry the target.
        carrying = len(view.nodes) - len(view.prepared.needing)
        message = f"{carrying}/{len(view.nodes)} nodes updated"
        if of is not None:
            message = f"{len(state.updated)} node(s) returned ({of.reason})"
        if state.failed or engine.blocked:
            message += f", {len(state.failed)} failed, {len(engine.blocked)} left out (see blocked)"
        suspect = [f.node for f in state.failed if f.suspect]
        if suspect:
            message += f"; hardware suspect, kept cordoned: {', '.join(suspect)}"
        return _decision(engine, state, Phase.ROLLED_BACK if of is not None else Phase.COMPLETE, message)
    if engine.starts or state.running:
        phase = Phase.PROGRESSING
    elif engine.waits or engine.waiting:
        phase = Phase.WAITING
    else:
        phase = Phase.BLOCKED
    said = engine.notes or [_held_message(engine)]
    message = "; ".join(said + _split_notes(view))
    if of is not None:
        # Whatever holds a rollback, it is rolling back: the message says what holds it.
        return _decision(engine, state, Phase.ROLLING_BACK, f"{message} — because {of.reason}")
    return _decision(engine, state, phase, message)


def _split_notes(view: FleetView) -> list[str]:
    """Says that workloads larger than the cap go in consecutive batches (the first; a count)."""
    notes = view.prepared.ordering.notes
    if len(notes) > 1:
        return [f"{notes[0]} (and {len(notes) - 1} more such workloads)"]
    return list(notes)


def _held_message(engine: Engine) -> str:
    """What holds the rollout when no step has a note: the first held node (rollout order)
    and its reason, blocked ones first (they need someone to act)."""
    for what, held in (("blocked", engine.blocked), ("waiting", engine.waiting)):
        if held:
            node = min(held, key=lambda n: engine.view.rank.get(n, 0))
            return f"{len(held)} node(s) {what}, first {node}: {held[node]}"
    return "nothing can start now"


def _materialize_blocked(engine: Engine) -> None:
    blocked, prepared, nodes = engine.blocked, engine.view.prepared, engine.view.nodes
    for refusal, members, start in engine.budget_waits:
        held = engine.waiting if refusal.waiting else blocked
        for node in members[start:]:
            if node in engine.pending and node not in blocked and node not in engine.waiting:
                held[node] = refusal.reason
    engine.budget_waits = []
    for node, failure in prepared.failed_earlier.items():
        if node not in blocked and node not in engine.failed and node in nodes:
            blocked[node] = f"FailedEarlier: {failure} (reset the node to retry)"
    for node, problem in prepared.not_returned.items():
        if node not in blocked and node not in engine.failed and node in nodes:
            blocked[node] = problem
    for node, problem in prepared.unreadable.items():
        if node not in blocked and node not in engine.failed and node in nodes:
            blocked[node] = f"UnreadableState: {problem} (repair or reset the node's record)"


def _decision(engine: Engine, state: RolloutState, phase: Phase, message: str) -> Decision:
    _materialize_blocked(engine)
    rank = engine.view.rank

    def listed(held: dict[str, str]) -> tuple[BlockedNode, ...]:
        first = heapq.nsmallest(MAX_BLOCKED_LISTED, held.items(), key=lambda item: rank.get(item[0], 0))
        return tuple(BlockedNode(node=n, reason=r) for n, r in first)

    reasons: dict[str, int] = {}
    for reason in engine.blocked.values():
        kind = reason.split(":", 1)[0]
        reasons[kind] = reasons.get(kind, 0) + 1
    future = [w for w in engine.waits if w > engine.now]
    ended = (Phase.HALTED, Phase.COMPLETE, Phase.ROLLED_BACK)
    wake = min(future) if future and phase not in ended else None
    return Decision(
        state=state,
        start=tuple(engine.starts) if phase is not Phase.HALTED else (),
        phase=phase,
        message=message,
        wake_at=wake,
        blocked=listed(engine.blocked),
        blocked_reasons=reasons,
        waiting=listed(engine.waiting),
        watch_fleet=engine.watch_fleet or bool(engine.blocked),
        counts=_counts(engine, state, len(engine.blocked)),
        fleet_gates=tuple(engine.fleet_gates),
    )


def _counts(engine: Engine, state: RolloutState, blocked: int) -> Counts:
    view = engine.view
    # Nodes whose stages are all done but whose node gate has not passed (running or failed). No
    # gate runs without one in the policy, nor on a rollback's nodes: none is unproven then.
    gated = state.spec.policy.node_gate and state.spec.rollback is None
    unfinished = {r.node for r in state.running} | {f.node for f in state.failed} if gated else set()
    unproven = len((unfinished & view.nodes.keys()) - view.prepared.needing)
    return Counts(
        targeted=len(view.nodes),
        needs_work=len(view.prepared.needing),
        running=len(state.running),
        updated=len(state.updated),
        failed=len(state.failed),
        pending=len(engine.pending),
        blocked=blocked,
        waiting=len(engine.waiting),
        unavailable=len(engine.tracker.unavailable),
        max_unavailable=view.cap,
        unproven=unproven,
        spared=state.spared,
    )
