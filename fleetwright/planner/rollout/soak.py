"""The soak step: wait a duration after the scope's earlier steps, and while it lasts halt as soon
as an updated node fails the step's health gate (watched on every fresh observation) or a check
of its fleet gate fails (``planner.rollout.fleetgate``: measured by the observe-and-decide activity, folded
into the scope's state here). A soak with checks ends only once they all passed, or a human
approved it while one was Inconclusive or MonitoringUnavailable. Only a Failed check halts it: a
MonitoringUnavailable one (Prometheus did not answer) holds it, measuring on, until an answer
lifts the hold; the wait is named MonitoringUnavailable from a check's first Error."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from fleetwright.planner.health.analysis import HELD, CheckPhase
from fleetwright.planner.policy.model import GATES_SCOPE, HealthGate, SoakStep
from fleetwright.planner.rollout import fleetgate
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.state import ScopeState
from fleetwright.planner.rollout.targets import FleetView


def soak(engine: Engine, scope: ScopeState, step: SoakStep) -> tuple[ScopeState, bool]:
    """Done once the soak's duration has passed since the scope entered it, its nodes healthy and
    its fleet gate passed."""
    if step.checks:
        scope, gated = _fleet_gate(engine, scope, step)
        if not gated:
            return scope, False
    return scope, _soaked(engine, scope, step)


def _fleet_gate(engine: Engine, scope: ScopeState, step: SoakStep) -> tuple[ScopeState, bool]:
    """Record this turn's measurements; whether the gate lets the soak end (it may still wait)."""
    taken = engine.observations.fleet_measurements
    before = fleetgate.judged(step, scope)[1]
    scope = fleetgate.took(scope, taken, step, engine.now)
    _, outcome, shown = fleetgate.judged(step, scope)
    engine.fleet_gate_moved("soak", before, outcome)
    if outcome is CheckPhase.FAILED:
        engine.halt_now(f"soak {step.name}: fleet gate failed: {shown}", scope.name)
        return scope, False
    approval = f"{scope.name}/{step.name}"
    if outcome in HELD and approval not in engine.observations.approvals:
        engine.notes.append(f"{scope.name}: soak {step.name} fleet gate {_waiting(outcome, shown, approval)}")
        engine.waits.extend(fleetgate.wakes(step, scope, engine.now))
        return scope, False
    if outcome is CheckPhase.RUNNING and (waiting := fleetgate.erroring(step, scope)):
        engine.notes.append(
            f"{scope.name}: soak {step.name} fleet gate MonitoringUnavailable: {waiting}; measuring on "
            "until Prometheus answers"
        )
    engine.waits.extend(fleetgate.wakes(step, scope, engine.now))
    return scope, outcome is not CheckPhase.RUNNING


def _waiting(outcome: CheckPhase, shown: str, approval: str) -> str:
    """What a held fleet gate waits for."""
    human = f"`fleetwright approve <profile> {approval}` (or abort)"
    if outcome is CheckPhase.MONITORING_UNAVAILABLE:
        return f"MonitoringUnavailable: {shown}; waiting for Prometheus to answer (measuring on) or {human}"
    return f"inconclusive: {shown}; waiting for {human}"


def _soaked(engine: Engine, scope: ScopeState, step: SoakStep) -> bool:
    if step.health_gate is not None:
        watched = {
            n for n in engine.updated if scope.name in (GATES_SCOPE, engine.view.compartment_of.get(n))
        }
        problem = _health_problem(step.health_gate, watched, engine.view)
        engine.watch_fleet = True  # a node may turn unhealthy at any time during the soak
        if problem is not None:
            engine.halt_now(f"soak {step.name}: {problem}", scope.name)
            return False
    entered = scope.entered_at or engine.now
    end = entered + timedelta(seconds=step.duration_seconds)
    if engine.now < end:
        engine.waits.append(end)
        engine.notes.append(f"{scope.name}: soak {step.name} until {end.isoformat()}")
        return False
    return True


def _health_problem(gate: HealthGate, nodes: Iterable[str], view: FleetView) -> str | None:
    for node in sorted(nodes):
        obs = view.nodes.get(node)
        if obs is None:
            continue
        if gate.node_ready and not obs.ready:
            return f"updated node {node} is not Ready"
        for condition, wanted in sorted(gate.conditions.items()):
            actual = obs.conditions.get(condition, "Unknown")
            if actual != wanted:
                return f"updated node {node} has {condition}={actual}, wanted {wanted}"
    return None
