"""The batches step: the scope's remaining nodes in batches whose sizes ``planner.rollout.sizing``
computes, each filled under the budget (a workload's nodes start together when workloads are
known, waiting a bounded time for one of them that cannot start), evaluated when its nodes have
finished, with the step's pause between batches; too many consecutive failed batches halt the
scope. The step's fleet gate (``background``) runs alongside: while it does not pass, no batch
opens or fills."""

from __future__ import annotations

from datetime import datetime, timedelta

from fleetwright.planner.policy.model import BatchesStep
from fleetwright.planner.rollout import background, refusals
from fleetwright.planner.rollout.budget import BUDGET, Refusal
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.sizing import evaluate_batch, next_batch_size
from fleetwright.planner.rollout.state import ScopeState


def batches(
    engine: Engine, scope: ScopeState, step: BatchesStep, members: list[str]
) -> tuple[ScopeState, bool]:
    """Open, fill and close batches until one is running or waits; done when no member is left.
    With ``checks``, their fleet gate (``background``) must let each turn's batches go on."""
    if not step.checks:
        return _batches(engine, scope, step, members)
    scope, clear = background.gate(engine, scope, step)
    if not clear:
        return scope, False
    scope, done = _batches(engine, scope, step, members)
    if not done and engine.halt is None:
        background.wake_for_next(engine, scope, step)
    return scope, done


def _batches(
    engine: Engine, scope: ScopeState, step: BatchesStep, members: list[str]
) -> tuple[ScopeState, bool]:
    while engine.halt is None:
        if scope.open:
            scope = _fill(engine, scope, members)
            if any(n in engine.running for n in scope.current):
                _note_batch(engine, scope)
                return scope, False
            if not scope.current:
                if any(n in engine.pending for n in members):
                    return scope, False  # every candidate is blocked; the reasons are recorded
                scope = _close(scope, engine.now)
                continue
            scope = _evaluate(engine, scope, step, members)
            continue
        if not any(n in engine.pending for n in members):
            finishing = engine.finishing_in(scope.name)
            if finishing:
                engine.notes.append(f"{scope.name}: {finishing} node(s) finishing the previous change")
            return scope, engine.running_in(scope.name) == 0 and not finishing
        if step.pause_seconds and scope.batch_closed_at is not None:
            resume = scope.batch_closed_at + timedelta(seconds=step.pause_seconds)
            if engine.now < resume:
                engine.waits.append(resume)
                engine.notes.append(f"{scope.name}: pause between batches until {resume.isoformat()}")
                return scope, False
        size = next_batch_size(step.strategy, scope.batch, _total(engine, scope, members))
        scope = scope.model_copy(update={"current_size": size, "current": ()})
    return scope, False


def _close(scope: ScopeState, now: datetime) -> ScopeState:
    return scope.model_copy(
        update={
            "current": (),
            "current_size": 0,
            "current_succeeded": 0,
            "current_failed": 0,
            "batch_closed_at": now,
        }
    )


def _fill(engine: Engine, scope: ScopeState, members: list[str]) -> ScopeState:
    if engine.view.prepared.ordering.units:
        return _fill_units(engine, scope, members)
    wanted = scope.current_size - len(scope.current)
    want = min(wanted, engine.max_starts - len(engine.starts))
    started: list[str] = []
    number = scope.batch.batches + 1
    for index, node in enumerate(members):
        if node not in engine.pending:
            continue
        if len(started) >= want:
            if want < wanted:
                engine.capped()  # a pending member is left for the next decision
            break
        if engine.try_start(node, scope.name, number):
            started.append(node)
        elif (refusal := engine.budget_refusal(node)) is not None:
            # Rooms only shrink within a call and every member shares this compartment's room:
            # the rest can start only if it costs nothing (a node already unavailable).
            engine.budget_waits.append((refusal, members, index + 1))
            started += engine.start_free(members[index + 1 :], want - len(started), scope.name, number)
            break
    if not started:
        return scope
    return scope.model_copy(update={"current": scope.current + tuple(started)})


def _fill_units(engine: Engine, scope: ScopeState, members: list[str]) -> ScopeState:
    """``_fill`` when workloads are known: a unit (a workload's nodes, ``ordering``) starts
    whole or not at all. A unit that does not fit the batch's room waits for a later batch
    while smaller ones after it fill the room; an empty batch grows to hold a whole unit (units
    are never larger than the cap). A unit the budget cannot hold whole waits for room."""
    units, chains = engine.view.prepared.ordering.units, engine.view.prepared.ordering.chains
    room = scope.current_size - len(scope.current)
    started: list[str] = []
    number = scope.batch.batches + 1
    seen: set[str] = set()
    passed: set[str] = set()  # workloads cut into pieces whose piece was passed over
    for index, node in enumerate(members):
        if node in seen or node not in engine.pending:
            continue
        whole = units.get(node, (node,))
        unit = [n for n in whole if n in engine.pending]
        seen.update(unit)
        chain = chains.get(node)
        if chain in passed or (len(unit) > room - len(started) and (scope.current or started)):
            if chain is not None:
                passed.add(chain)
            continue
        if len(whole) > 1 and _waits_for_member(engine, whole, unit):
            if chain is not None:
                passed.add(chain)
            continue
        if len(engine.starts) + len(unit) > engine.max_starts and engine.starts:
            engine.capped()
            break
        taken, full = _start_unit(engine, unit, scope.name, number, grows=len(unit) > room)
        started += taken
        if not taken and chain is not None:
            passed.add(chain)
        if full is not None:
            # As in ``_fill``: the cap is full, only free starts remain.
            engine.budget_waits.append((full, members, index + 1))
            started += engine.start_free(members[index + 1 :], room - len(started), scope.name, number)
            break
        if len(started) >= room:
            break
    if not started:
        return scope
    return scope.model_copy(update={"current": scope.current + tuple(started)})


def _waits_for_member(engine: Engine, whole: tuple[str, ...], unit: list[str]) -> bool:
    """Hold the unit's startable nodes while one of its nodes cannot start, within the bound
    (``refusals.unit_refusal``); the nodes that cannot start keep their own reason."""
    wait = refusals.unit_refusal(engine, whole)
    if wait is None:
        return False
    for member in unit:
        own = engine.view.node_refusal(member)
        engine.hold(member, wait if own is None else Refusal(own, waiting=False))
    return True


def _start_unit(
    engine: Engine, unit: list[str], scope: str, batch: int, *, grows: bool
) -> tuple[list[str], Refusal | None]:
    """Start a unit's nodes; also the budget's refusal when a one-node unit found the cap full."""
    if len(unit) == 1:
        if engine.try_start(unit[0], scope, batch):
            return unit, None
        return [], engine.budget_refusal(unit[0])
    refusal = _unit_refusal(engine, unit)
    if refusal is not None:
        for member in unit:
            engine.hold(member, refusal)
        return [], None
    if grows:
        engine.notes.append(f"{scope}: batch {batch} grows to {len(unit)} nodes for one workload")
    return [n for n in unit if engine.try_start(n, scope, batch)], None


def _unit_refusal(engine: Engine, unit: list[str]) -> Refusal | None:
    """Why the unit cannot start whole now: a node of it waits for its workloads, or the
    budget cannot take every node at once (None: it can)."""
    waiting = [r for r in (refusals.workload_refusal(engine, n) for n in unit) if r is not None]
    if waiting:
        return waiting[0]
    tracker = engine.tracker
    compartment = engine.view.compartment_of[unit[0]]
    cost = sum(tracker.cost(n) for n in unit)
    mine = len(tracker.ours) + len(unit)
    mine_here = tracker.ours_used.get(compartment, 0) + len(unit)
    if (
        cost <= min(tracker.room(), tracker.compartment_room(compartment))
        and mine <= tracker.cap
        and mine_here <= tracker.compartment_caps.get(compartment, 0)
    ):
        return None
    holders = tracker.unavailable
    reason = (
        f"{BUDGET}: the {len(unit)} nodes of one workload start together; "
        f"{len(holders)} of maxUnavailable {tracker.cap} in use"
    )
    return Refusal(reason, waiting=bool(tracker.ours), outside=bool(holders - tracker.reporting))


def _evaluate(engine: Engine, scope: ScopeState, step: BatchesStep, members: list[str]) -> ScopeState:
    size = len(scope.current)
    batch = evaluate_batch(
        step.strategy,
        scope.batch,
        size=size,
        succeeded=scope.current_succeeded,
        total=_total(engine, scope, members),
    )
    scope = _close(scope.model_copy(update={"batch": batch}), engine.now)
    if batch.should_stop:
        engine.halt_now(
            f"compartment {scope.name}: {batch.consecutive_failures} consecutive failed batches "
            f"(failureThreshold {step.strategy.failure_threshold})",
            scope.name,
        )
    return scope


def _total(engine: Engine, scope: ScopeState, members: list[str]) -> int:
    active = sum(1 for n in members if n in engine.pending) + engine.running_in(scope.name)
    return scope.batch.processed + active


def _note_batch(engine: Engine, scope: ScopeState) -> None:
    active = sum(1 for n in scope.current if n in engine.running)
    engine.notes.append(
        f"{scope.name}: batch {scope.batch.batches + 1} ({len(scope.current)}/{scope.current_size} "
        f"started, {active} running)"
    )
