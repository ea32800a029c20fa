"""The fleet gate of a batches step, in the background while its batches run: this turn's
measurements folded into the scope's state (``planner.rollout.fleetgate``), each check's passed run set
aside so the next begins, and the verdict ``batching`` obeys before it opens or fills a batch. A
Failed check fires the failure rule at once; an Inconclusive one holds new batches until a human
approves ``<scope>/<step>`` (from then on an Inconclusive or MonitoringUnavailable run of that
step is passed, and said so); a MonitoringUnavailable one (Prometheus did not answer) holds them
too, measuring on, until an answer lifts the hold (named from a check's first Error, while new
batches still start); nodes already running finish either way."""

from __future__ import annotations

from fleetwright.planner.health.analysis import HELD, CheckPhase, CheckState
from fleetwright.planner.policy.model import BatchesStep
from fleetwright.planner.rollout import fleetgate
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.state import ScopeState


def gate(engine: Engine, scope: ScopeState, step: BatchesStep) -> tuple[ScopeState, bool]:
    """Record this turn's measurements; whether batches may start (else halted or held)."""
    before = fleetgate.judged(step, scope)[1]
    scope = fleetgate.took(scope, engine.observations.fleet_measurements, step, engine.now)
    approval = f"{scope.name}/{step.name}"
    approved = approval in engine.observations.approvals
    while ended := [c for c in fleetgate.states(step, scope) if _ended(c, approved)]:
        for check in ended:
            if check.outcome in HELD:
                engine.notes.append(
                    f"{scope.name}: batches {step.name} fleet gate {check.describe()}, passed by approval"
                )
            else:  # a run that passed
                engine.fleet_gate_moved("batches", CheckPhase.RUNNING, check.outcome)
            scope = fleetgate.set_aside(scope, check)
    checks, outcome, shown = fleetgate.judged(step, scope)
    engine.fleet_gate_moved("batches", before, outcome)
    if outcome is CheckPhase.FAILED:
        engine.halt_now(f"batches {step.name}: fleet gate failed: {shown}", scope.name)
        return scope, False
    if outcome is CheckPhase.INCONCLUSIVE:
        engine.notes.append(
            f"{scope.name}: batches {step.name} fleet gate inconclusive: {shown}; no new batch until "
            f"`fleetwright approve <profile> {approval}` (or abort)"
        )
        return scope, False
    if outcome is CheckPhase.MONITORING_UNAVAILABLE:
        engine.notes.append(
            f"{scope.name}: batches {step.name} fleet gate MonitoringUnavailable: {shown}; no new "
            f"batch until Prometheus answers (measuring on) or `fleetwright approve <profile> "
            f"{approval}` (or abort)"
        )
        wake_for_next(engine, scope, step)
        return scope, False
    if waiting := fleetgate.erroring(step, scope):
        engine.notes.append(
            f"{scope.name}: batches {step.name} fleet gate MonitoringUnavailable: {waiting}; batches go "
            "on until its Errors hold the gate, measuring on until Prometheus answers"
        )
        return scope, True
    measured = [c.describe() for c in checks if c.measured]
    if measured:
        engine.notes.append(f"{scope.name}: batches {step.name} fleet gate {'; '.join(measured)}")
    return scope, True


def _ended(check: CheckState, approved: bool) -> bool:
    """A run that passed, or was held (Inconclusive, MonitoringUnavailable) and its step
    approved: the next run begins."""
    return check.measured > 0 and (
        check.outcome is CheckPhase.SUCCESSFUL or (check.outcome in HELD and approved)
    )


def wake_for_next(engine: Engine, scope: ScopeState, step: BatchesStep) -> None:
    """Wake the rollout for each check's next measurement, also while nodes run (none before a
    node was updated: that node's report wakes it)."""
    if engine.updated:
        engine.waits.extend(fleetgate.wakes(step, scope, engine.now))
