"""Walking the policy's steps for one ``decide`` call: the rollout-wide gates first, then, once
they are all done, every compartment's own steps; each scope runs its current step (``canary``,
``soak``, ``approval``, ``batching``) and moves to the next when it is done. A halt found anywhere
in the walk cancels the call's starts."""

from __future__ import annotations

from datetime import datetime

from fleetwright.planner.policy.model import ApprovalStep, CanaryStep, SoakStep, Step
from fleetwright.planner.rollout.approval import approval
from fleetwright.planner.rollout.batching import batches
from fleetwright.planner.rollout.canary import canary
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.failures import fire_held_by_failed
from fleetwright.planner.rollout.soak import soak
from fleetwright.planner.rollout.state import RolloutState, RunningNode, ScopeState


def walk(engine: Engine, state: RolloutState) -> RolloutState:
    """``state`` after every scope has advanced as far as it can now; starts in ``engine.starts``."""
    policy, view = engine.policy, engine.view
    gates = _scope(engine, state.gates, policy.gate_steps(), engine.queue(view.order))
    compartments = list(state.compartments)
    if engine.halt is None and gates.step >= len(policy.gate_steps()):
        for index, scope in enumerate(compartments):
            if engine.halt is not None:
                break
            queue = engine.queue(view.members.get(scope.name, []))
            compartments[index] = _scope(engine, scope, policy.compartment_steps(scope.name), queue)
    if engine.halt is None and engine.held_by_failed:
        fire_held_by_failed(engine)
        # As if the walk never happened: no start, no batch opened for nodes that never ran.
        engine.starts = []
        return state.model_copy(update={"halt": engine.halt})
    if engine.halt is not None:
        engine.starts = []  # a halt found later in this call cancels this call's starts too
    running = state.running + tuple(
        RunningNode(node=s.node, scope=s.scope, batch=s.batch, started_at=engine.now, regate=s.regate)
        for s in engine.starts
    )
    return state.model_copy(
        update={
            "gates": gates,
            "compartments": tuple(compartments),
            "running": tuple(sorted(running, key=lambda r: r.node)),
            "halt": engine.halt,
            "held_for_workloads": {n: t for n, t in engine.held_since.items() if n in engine.pending},
            "unit_waits": _unit_waits(engine),
        }
    )


def _unit_waits(engine: Engine) -> dict[str, datetime]:
    """The units still waiting for a node: still a unit, by the same first node, some node pending."""
    units = engine.view.prepared.ordering.units
    return {
        first: since
        for first, since in engine.unit_since.items()
        if units.get(first, ("",))[0] == first and any(n in engine.pending for n in units[first])
    }


def _scope(engine: Engine, scope: ScopeState, steps: tuple[Step, ...], members: list[str]) -> ScopeState:
    if scope.step < len(steps) and not _has_work(engine, members, scope):
        # Nothing to do in this scope: skip its soaks and approvals rather than wait for nothing.
        return scope.model_copy(update={"step": len(steps)})
    while scope.step < len(steps) and engine.halt is None:
        if scope.entered_at is None:
            scope = scope.model_copy(update={"entered_at": engine.now})
        scope, done = _step(engine, scope, steps[scope.step], members)
        if not done:
            break
        scope = scope.model_copy(
            update={"step": scope.step + 1, "entered_at": None, "fleet_gate": (), "fleet_gate_next": {}}
        )
    return scope


def _has_work(engine: Engine, queue: list[str], scope: ScopeState) -> bool:
    if scope.open or scope.canary:
        return True
    return (
        any(n in engine.pending for n in queue)
        or engine.running_in(scope.name) > 0
        or engine.finishing_in(scope.name) > 0
    )


def _step(engine: Engine, scope: ScopeState, step: Step, members: list[str]) -> tuple[ScopeState, bool]:
    if isinstance(step, CanaryStep):
        return canary(engine, scope, step, members)
    if isinstance(step, SoakStep):
        return soak(engine, scope, step)
    if isinstance(step, ApprovalStep):
        return scope, approval(engine, scope, step)
    return batches(engine, scope, step, members)
