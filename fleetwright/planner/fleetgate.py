"""The fleet gate of a soak step, pure: which of its checks are due for a measurement now, over
which nodes, and where the soak's checks stand.

A soak with ``checks`` measures each of them on its own schedule from the moment the scope entered
the soak (``initialDelaySeconds``, then every ``intervalSeconds``, ``count`` times), over every node
the rollout updated so far (``{{nodes}}``). The observe-and-decide activity takes the measurements
``due`` names before it decides, so each is recorded once, in that activity's result; the soak step
(``planner.rollout.soak``) folds them into its scope's state and judges them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from fleetwright.api.health import MetricCheck, nodes_alternation
from fleetwright.planner.analysis import CheckState, Measurement, Phase, judge
from fleetwright.planner.base import Frozen
from fleetwright.planner.policy import GATES_SCOPE, SoakStep
from fleetwright.planner.rolloutstate import RolloutState, ScopeState


class FleetMeasureRequest(Frozen):
    """One fleet-gate measurement to take: ``check`` for scope ``scope``'s soak at step ``step``."""

    scope: str
    step: int
    check: MetricCheck
    placeholders: dict[str, str]


def soak_at(state: RolloutState, scope: ScopeState) -> SoakStep | None:
    """The soak with checks ``scope`` is in, if any."""
    policy = state.spec.policy
    steps = policy.gate_steps() if scope.name == GATES_SCOPE else policy.compartment_steps(scope.name)
    if scope.step >= len(steps):
        return None
    step = steps[scope.step]
    return step if isinstance(step, SoakStep) and step.checks else None


def taken(scope: ScopeState, check: MetricCheck) -> list[Measurement]:
    return [m for m in scope.fleet_gate if m.check == check.name]


def due_at(scope: ScopeState, check: MetricCheck) -> datetime | None:
    """When the check's next measurement is due (None: it needs no more)."""
    so_far = taken(scope, check)
    if scope.entered_at is None or judge(check, so_far).outcome is not Phase.RUNNING:
        return None
    offset = check.initial_delay_seconds + check.interval_seconds * len(so_far)
    return scope.entered_at + timedelta(seconds=offset)


def states(step: SoakStep, scope: ScopeState) -> list[CheckState]:
    return [judge(check, taken(scope, check)) for check in step.checks]


def due(state: RolloutState, now: datetime) -> tuple[FleetMeasureRequest, ...]:
    """Every fleet-gate measurement due at ``now``."""
    nodes = nodes_alternation(sorted(state.updated))
    values = {"nodes": nodes, "profile": state.spec.profile, "node": ""}
    return tuple(
        FleetMeasureRequest(scope=scope.name, step=scope.step, check=check, placeholders=values)
        for scope, step in _soaking(state)
        for check in step.checks
        if (when := due_at(scope, check)) is not None and when <= now
    )


def _soaking(state: RolloutState) -> Iterator[tuple[ScopeState, SoakStep]]:
    for scope in (state.gates, *state.compartments):
        step = soak_at(state, scope)
        if step is not None:
            yield scope, step
