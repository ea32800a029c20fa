"""The canary step: a few nodes, chosen to cover the most common kinds of change, finish before
any other node of the scope starts; a failed canary halts the rollout whatever ``maxFailedNodes``
says (``failures.check_failures`` keeps it halted on later calls)."""

from __future__ import annotations

from fleetwright.planner.node.work import NodeWork
from fleetwright.planner.policy.model import CanaryStep
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.state import ScopeState


def canary(
    engine: Engine, scope: ScopeState, step: CanaryStep, members: list[str]
) -> tuple[ScopeState, bool]:
    """Start the scope's canary nodes (chosen once); done when every one of them has finished."""
    if scope.canary is None:
        scope = scope.model_copy(update={"canary": tuple(_choose(engine, step, members))})
    chosen = scope.canary or ()
    broken = [n for n in chosen if n in engine.failed]
    if broken:
        detail = "; ".join(
            f"{n}: {engine.failed[n].message}" if engine.failed[n].message else n for n in broken
        )
        engine.halt_now(f"canary failed ({detail})", scope.name)
        return scope, False
    outstanding = [n for n in chosen if n in engine.view.nodes and engine.unfinished(n)]
    for node in outstanding:
        if node not in engine.pending:
            continue
        if len(engine.starts) >= engine.max_starts:
            engine.capped()  # a canary wider than a decision starts over several
            break
        engine.try_start(node, scope.name, 0)
    if outstanding:
        engine.notes.append(f"{scope.name}: canary {len(chosen) - len(outstanding)}/{len(chosen)} done")
    return scope, not outstanding


def _choose(engine: Engine, step: CanaryStep, members: list[str]) -> list[str]:
    view = engine.view
    candidates = [n for n in members if n in engine.pending]
    if step.selector is not None:
        selector = step.selector
        return [n for n in candidates if selector.matches(view.nodes[n].labels)]
    # Prefer nodes that can start now, and cover the most common kinds of change first (one
    # node per kind, round-robin): a canary that only saw a config tweak proves nothing about
    # the driver upgrade most nodes will get. Deterministic: groups keep the rollout order.
    ready = [n for n in candidates if view.node_refusal(n) is None]
    rest = [n for n in candidates if view.node_refusal(n) is not None]
    ordering = view.prepared.ordering
    if ordering.idle or ordering.sizes:
        # With workloads known, a canary on an idle node interrupts no job, one on a single-node
        # job's node interrupts no job twice, and otherwise the smallest workload takes the
        # extra interruption (its other nodes follow in later batches).
        ready.sort(key=lambda n: 0 if n in ordering.idle else ordering.sizes.get(n, 1))
    groups: dict[tuple[str, ...], list[str]] = {}
    for node in ready + rest:
        groups.setdefault(_signature(view.work[node]), []).append(node)
    ranked = sorted(groups.values(), key=len, reverse=True)  # stable: ties keep first appearance
    picks: list[str] = []
    depth = 0
    while len(picks) < (step.count or 0) and any(depth < len(g) for g in ranked):
        picks.extend(g[depth] for g in ranked if depth < len(g))
        depth += 1
    return picks[: step.count]


def _signature(work: NodeWork) -> tuple[str, ...]:
    return (*(f"{p.package}:{p.action.value}" for p in work.packages), work.interrupt.kind.value)
