"""The fleet gate, pure: which checks of a soak step, or of a batches step in the background, are
due for a measurement now, over which nodes, and where they stand.

A soak or batches step with ``checks`` measures each of them on its own schedule from the moment
the scope entered the step (``initialDelaySeconds``, then every ``intervalSeconds``), over every
node the rollout updated so far (``{{nodes}}``). A soak's check takes ``count`` measurements. A
batches step's check watches the whole step in *runs*: a run of ``count`` measurements that passed
leaves the state and the next run begins; the limits apply per run. Its measurements come one
interval after the last (``ScopeState.fleet_gate_next``), so a wait (a hold, a worker down) never
makes them catch up in a burst, and only once a node was updated (before, ``{{nodes}}`` would
match nothing and every measurement would say no data). The observe-and-decide activity takes
the measurements ``due`` names before it decides, so each is recorded once, in that activity's
result; the step (``planner.rollout.soak``, ``planner.rollout.background``) records them in its
scope's state (``took``) and judges them. An Error does not use up ``count`` and a check held
MonitoringUnavailable stays due every interval, so the first answer after an outage lifts the
hold by itself; the wait is named MonitoringUnavailable from a check's first Error
(``erroring``); a long outage keeps a bounded number of Errors in the state (``analysis.replaces``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta

from fleetwright.api.health import MetricCheck, nodes_alternation
from fleetwright.planner.base import Frozen
from fleetwright.planner.health.analysis import (
    ENDED,
    CheckPhase,
    CheckState,
    Measurement,
    ScopedMeasurement,
    gap_before,
    gate_outcome,
    judge,
    replaces,
    unavailable_checks,
)
from fleetwright.planner.policy.model import GATES_SCOPE, BatchesStep, SoakStep
from fleetwright.planner.rollout.state import RolloutState, ScopeState

GatedStep = SoakStep | BatchesStep


class FleetMeasureRequest(Frozen):
    """One fleet-gate measurement to take: ``check`` for scope ``scope``'s step ``step``."""

    scope: str
    step: int
    check: MetricCheck
    placeholders: dict[str, str]


def gated_at(state: RolloutState, scope: ScopeState) -> GatedStep | None:
    """The soak or batches step with checks ``scope`` is in, if any."""
    policy = state.spec.policy
    steps = policy.gate_steps() if scope.name == GATES_SCOPE else policy.compartment_steps(scope.name)
    if scope.step >= len(steps):
        return None
    step = steps[scope.step]
    return step if isinstance(step, GatedStep) and step.checks else None


def taken(scope: ScopeState, check: MetricCheck) -> list[Measurement]:
    """The check's measurements in its current run (a soak has one run)."""
    return [m for m in scope.fleet_gate if m.check == check.name]


def due_at(scope: ScopeState, check: MetricCheck) -> datetime | None:
    """When the check's next measurement is due (None: its run ended, it needs no more; a check
    held MonitoringUnavailable is still measured, every interval)."""
    so_far = taken(scope, check)
    if scope.entered_at is None or judge(check, so_far).outcome in ENDED:
        return None
    if check.name in scope.fleet_gate_next:
        return scope.fleet_gate_next[check.name]
    offset = sum(gap_before(check, measured) for measured in range(len(so_far) + 1))
    return scope.entered_at + timedelta(seconds=offset)


def states(step: GatedStep, scope: ScopeState) -> list[CheckState]:
    """Each check's state in its current run."""
    return [judge(check, taken(scope, check)) for check in step.checks]


def judged(step: GatedStep, scope: ScopeState) -> tuple[list[CheckState], CheckPhase, str]:
    """Each check's state in its current run, the gate's outcome, and the checks that have that
    outcome, described (what a halt or a hold names)."""
    checks = states(step, scope)
    outcome = gate_outcome(checks)
    if outcome is CheckPhase.MONITORING_UNAVAILABLE:
        return checks, outcome, unavailable_checks(step.checks, checks)
    return checks, outcome, "; ".join(c.describe() for c in checks if c.outcome is outcome)


def erroring(step: GatedStep, scope: ScopeState) -> str:
    """The checks whose last measurement was an Error, named MonitoringUnavailable from the first
    (``analysis.unavailable``), before their Errors hold the gate ("" if none)."""
    return unavailable_checks(step.checks, states(step, scope))


def wakes(step: GatedStep, scope: ScopeState, now: datetime) -> list[datetime]:
    """When the rollout must wake for each check's next measurement: a measurement due now (the
    step just began) is taken by the next turn, a second on."""
    due = (due_at(scope, check) for check in step.checks)
    return [max(when, now + timedelta(seconds=1)) for when in due if when is not None]


def took(
    scope: ScopeState, measured: Iterable[ScopedMeasurement], step: GatedStep, now: datetime
) -> ScopeState:
    """``scope`` with this turn's measurements for its current step recorded and the next
    measurement of each check measured ``now`` due one interval on."""
    return _scheduled(_fold(scope, measured, step), measured, step, now)


def _fold(scope: ScopeState, measured: Iterable[ScopedMeasurement], step: GatedStep) -> ScopeState:
    """``scope`` with the measurements taken for its current step recorded; an Error while its
    check is held MonitoringUnavailable replaces that check's last one."""
    new = [m.measurement for m in measured if m.scope == scope.name and m.step == scope.step]
    if not new:
        return scope
    checks = {check.name: check for check in step.checks}
    kept = scope.fleet_gate
    for measurement in new:
        check = checks.get(measurement.check)
        mine = [m for m in kept if m.check == measurement.check]
        if check is not None and replaces(check, mine, measurement):
            last = max(i for i, m in enumerate(kept) if m.check == measurement.check)
            kept = (*kept[:last], *kept[last + 1 :])
        kept = (*kept, measurement)
    return scope.model_copy(update={"fleet_gate": kept})


def _scheduled(
    scope: ScopeState, measured: Iterable[ScopedMeasurement], step: GatedStep, now: datetime
) -> ScopeState:
    """``scope`` with the next measurement of each check measured ``now`` due one interval on."""
    got = {m.measurement.check for m in measured if m.scope == scope.name and m.step == scope.step}
    following = dict(scope.fleet_gate_next)
    for check in step.checks:
        if check.name in got:
            following[check.name] = now + timedelta(seconds=gap_before(check, measured=1))
    return scope.model_copy(update={"fleet_gate_next": following}) if got else scope


def set_aside(scope: ScopeState, check: CheckState) -> ScopeState:
    """``scope`` with ``check``'s current run ended: its measurements leave the state and the
    check's next run starts empty."""
    left = check.measured
    kept: list[Measurement] = []
    for measurement in scope.fleet_gate:
        if measurement.check == check.check and left > 0:
            left -= 1
            continue
        kept.append(measurement)
    return scope.model_copy(update={"fleet_gate": tuple(kept)})


def due(state: RolloutState, now: datetime) -> tuple[FleetMeasureRequest, ...]:
    """Every fleet-gate measurement due at ``now`` (none while the rollout is halted)."""
    if state.halt is not None:
        return ()
    nodes = nodes_alternation(sorted(state.updated))
    values = {"nodes": nodes, "profile": state.spec.profile, "node": ""}
    return tuple(
        FleetMeasureRequest(scope=scope.name, step=scope.step, check=check, placeholders=values)
        for scope, step in _gated(state)
        if state.updated or not isinstance(step, BatchesStep)
        for check in step.checks
        if (when := due_at(scope, check)) is not None and when <= now
    )


def _gated(state: RolloutState) -> Iterator[tuple[ScopeState, GatedStep]]:
    for scope in (state.gates, *state.compartments):
        step = gated_at(state, scope)
        if step is not None:
            yield scope, step
