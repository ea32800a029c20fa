"""The failure rules: a failed canary, more failed nodes than a ``maxFailedNodes`` allows
(rollout-wide or a compartment's), and a budget held by nothing but this rollout's own failed
nodes each halt the rollout with the scope's failure action (halt, or roll back). A node whose
health gate failed again on the version a rollback returned it to (``FailedNode.suspect``) is its
hardware's failure, not the change's: no rule counts it, so the rollback returns the rest."""

from __future__ import annotations

from fleetwright.planner.policy.model import GATES_SCOPE, FailurePolicy
from fleetwright.planner.rollout.budget import BUDGET
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.state import Halt, RolloutState


def check_failures(engine: Engine, state: RolloutState) -> RolloutState:
    """``state`` halted when a rule fires on its failed nodes (``state`` itself when none does)."""
    policy = engine.policy
    canaries = {n for s in (state.gates, *state.compartments) for n in s.canary or ()}
    counted = [f for f in state.failed if not f.suspect]
    broken = [f for f in counted if f.node in canaries]
    if broken:
        # A failed canary fires the failure action whatever maxFailedNodes says.
        detail = "; ".join(f"{f.node}: {f.message}" if f.message else f.node for f in broken)
        failure = policy.failure_for(broken[0].scope)
        halt = Halt(
            reason=f"canary failed ({detail})", action=failure.action, scope=broken[0].scope, at=engine.now
        )
        return state.model_copy(update={"halt": halt})
    total = len(counted)
    if _exceeded(policy.failure, total):
        return _halted(
            engine,
            state,
            f"{total} node(s) failed (maxFailedNodes {policy.failure.max_failed_nodes})",
            policy.failure,
            GATES_SCOPE,
        )
    for compartment in policy.compartments:
        if compartment.failure is None:
            continue
        count = sum(1 for f in counted if engine.view.compartment_of.get(f.node) == compartment.name)
        if _exceeded(compartment.failure, count):
            reason = f"compartment {compartment.name}: {count} node(s) failed"
            return _halted(engine, state, reason, compartment.failure, compartment.name)
    return state


def fire_held_by_failed(engine: Engine) -> None:
    """A budget is full of nodes this rollout failed on: nothing it runs or waits for frees it,
    so no node it caps can ever start, and a failure rule tolerating that many failures can
    never fire by count. The rollout cannot complete; that is its failure (docs/status.md)."""
    scope, refusal = next(iter(engine.held_by_failed.items()))
    failure = engine.policy.failure if scope == GATES_SCOPE else engine.policy.failure_for(scope)
    tolerated = failure.max_failed_nodes
    why = "" if tolerated is None else f" (maxFailedNodes {tolerated} tolerates them)"
    held = refusal.removeprefix(f"{BUDGET}: ")
    engine.halt_now(f"no node can start: {held}; only this rollout's failed nodes hold it{why}", scope)


def _halted(
    engine: Engine, state: RolloutState, reason: str, failure: FailurePolicy, scope: str
) -> RolloutState:
    counted = [f for f in state.failed if not f.suspect]
    if counted:
        first = counted[0]
        reason += f"; first: {first.node}" + (f" ({first.message})" if first.message else "")
    halt = Halt(reason=reason, action=failure.action, scope=scope, at=engine.now)
    return state.model_copy(update={"halt": halt})


def _exceeded(failure: FailurePolicy, failed: int) -> bool:
    return failure.max_failed_nodes is not None and failed > failure.max_failed_nodes
