"""A campaign stage's fleet gate, pure: once every cluster of the stage completed, each of the
stage's checks is measured in each of its clusters (over the nodes the campaign changed there) on
the check's own schedule, and judged by ``planner.health.analysis``'s rules, a cluster's
measurements of a check apart from every other's. The gate fails as soon as one (cluster, check)
failed, waits for a human while one is Inconclusive, holds while one is MonitoringUnavailable
(Prometheus does not answer: never a failure) and passes once every one passed.

Owns when a measurement is due, how one is recorded and what the gate says; the campaign's
planner (``planner.campaign``) decides what the outcome does. Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from fleetwright.api.campaign import CampaignSpec, CampaignStage
from fleetwright.api.health import MetricCheck
from fleetwright.planner.base import Frozen
from fleetwright.planner.health.analysis import (
    ENDED,
    CheckPhase,
    CheckState,
    Measurement,
    gap_before,
    gate_outcome,
    judge,
    recorded,
    unavailable,
)


class GateMeasurement(Frozen):
    """One measurement of a stage's fleet gate, in one cluster, when it was taken."""

    cluster: str
    at: datetime
    measurement: Measurement


class GateRequest(Frozen):
    """A measurement due now: ``check`` in ``cluster``."""

    cluster: str
    check: MetricCheck


class GateView(Frozen):
    """What the gate says now."""

    outcome: CheckPhase
    message: str
    due: tuple[GateRequest, ...] = ()
    wake_at: datetime | None = None


def _mine(gate: Sequence[GateMeasurement], cluster: str, check: str) -> list[GateMeasurement]:
    """The measurements of ``check`` in ``cluster``, in the order they were taken."""
    return [m for m in gate if m.cluster == cluster and m.measurement.check == check]


def _due_at(
    mine: Sequence[GateMeasurement], check: MetricCheck, state: CheckState, began: datetime
) -> datetime | None:
    """When the next measurement of ``check`` (measured ``mine`` so far, judged ``state``) is due
    (None: it ended)."""
    if state.outcome in ENDED:
        return None
    last = mine[-1].at if mine else began
    return last + timedelta(seconds=gap_before(check, measured=len(mine)))


def _states(
    spec: CampaignSpec, stage: CampaignStage, gate: Sequence[GateMeasurement]
) -> list[tuple[str, MetricCheck, list[GateMeasurement], CheckState]]:
    """Each (cluster, check) of the gate: its measurements and its state."""
    found = []
    for cluster in stage.clusters:
        for check in spec.stage_checks(stage):
            mine = _mine(gate, cluster, check.name)
            found.append((cluster, check, mine, judge(check, [m.measurement for m in mine])))
    return found


def view(
    spec: CampaignSpec, stage: CampaignStage, gate: Sequence[GateMeasurement], began: datetime, now: datetime
) -> GateView:
    """The gate of ``stage`` (its clusters complete since ``began``) at ``now``."""
    states = _states(spec, stage, gate)
    outcome = gate_outcome(s for _, _, _, s in states)
    # A check erroring is named MonitoringUnavailable from its first Error (``unavailable``).
    named = (
        f"{cluster}: {unavailable(check, s) or s.describe()}"
        for cluster, check, _, s in states
        if s.outcome is outcome
    )
    message = f"stage {stage.name}'s fleet gate {outcome.value}: " + "; ".join(named)
    due, wakes = [], []
    for cluster, check, mine, state in states:
        when = _due_at(mine, check, state, began)
        if when is None:
            continue
        if when <= now:
            due.append(GateRequest(cluster=cluster, check=check))
        else:
            wakes.append(when)
    return GateView(outcome=outcome, message=message, due=tuple(due), wake_at=min(wakes, default=None))


def took(
    spec: CampaignSpec,
    stage: CampaignStage,
    gate: Sequence[GateMeasurement],
    cluster: str,
    measurement: Measurement,
    *,
    now: datetime,
) -> tuple[GateMeasurement, ...]:
    """``gate`` with ``measurement`` of ``cluster`` recorded (an Error while its check is already
    MonitoringUnavailable replaces the last one, ``analysis.recorded``)."""
    check = next((c for c in spec.stage_checks(stage) if c.name == measurement.check), None)
    if check is None:  # the spec changed under it: a measurement of no check of this gate
        return tuple(gate)
    mine = _mine(gate, cluster, check.name)
    others = [m for m in gate if (m.cluster, m.measurement.check) != (cluster, check.name)]
    kept = recorded(check, [m.measurement for m in mine], measurement)
    replaced = len(kept) == len(mine)  # the last Error replaced, not followed
    mine = [
        *(mine[:-1] if replaced else mine),
        GateMeasurement(cluster=cluster, at=now, measurement=measurement),
    ]
    return (*others, *mine)
