"""The campaign's decisions: which member clusters start their rollout now, whether a stage's
gate (soak, fleet gate, approval) holds the next one (the last stage's, the campaign's completion),
and the one failure rule over every cluster (failed nodes, or a failed fleet gate).

Takes the campaign spec, its state, what each member's rollout last reported and ``now``;
returns the next state and what to do. A cluster counts only what its rollout reported: one that
cannot be reached reports nothing new, so it is never counted as failed nodes. Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import Field

from fleetwright.api.campaign import CampaignSpec, CampaignStage
from fleetwright.planner import campaigngate
from fleetwright.planner.base import Frozen
from fleetwright.planner.campaigngate import GateMeasurement, GateRequest
from fleetwright.planner.health.analysis import HELD, CheckPhase, Measurement

COMPLETE = "Complete"
ROLLED_BACK = "RolledBack"


class CampaignPhase(StrEnum):
    PROGRESSING = "Progressing"
    WAITING = "Waiting"
    """A stage's gate holds the next stage (or completion): its soak, fleet gate or approval."""
    PAUSED = "Paused"
    HALTED = "Halted"
    """The failure rule fired: no new node starts in any cluster until resumed."""
    ROLLING_BACK = "RollingBack"
    """The failure rule fired with ``action: rollback``: every started cluster returns what it changed."""
    ROLLED_BACK = "RolledBack"
    COMPLETE = "Complete"


class ClusterReport(Frozen):
    """What a member's rollout last reported (its published progress, in short)."""

    phase: str
    generation: int = 0
    """The campaign generation the rollout runs: a report of an earlier one is not complete."""
    targeted: int = 0
    updated: int = 0
    failed: int = 0
    message: str = ""


class CampaignState(Frozen):
    generation: int = 0
    """The Campaign generation this pass of the stages rolls out (a new one starts them over)."""
    stage: int = 0
    """Index of the stage in progress (== the number of stages once all are done)."""
    started: tuple[str, ...] = ()
    """Clusters whose rollout was started (or retargeted) at this generation, in start order."""
    stage_done_at: datetime | None = None
    """When every cluster of the stage in progress completed: its soak counts from there."""
    approved: tuple[str, ...] = ()
    """Stages a human approved the next stage after."""
    halted: str = ""
    """Why the failure rule fired (empty: it has not, or a human resumed since)."""
    gate: tuple[GateMeasurement, ...] = ()
    """The fleet-gate measurements of the stage in progress, once its clusters completed."""


class CampaignDecision(Frozen):
    state: CampaignState
    phase: CampaignPhase
    message: str
    start: tuple[str, ...] = ()
    """Clusters whose rollout starts now."""
    hold: bool = False
    """No new node may start in any cluster: the failure rule fired, or a human paused."""
    rollback: str = ""
    """Every started cluster must return what it changed, for this reason (``action: rollback``)."""
    wake_at: datetime | None = None
    failed: dict[str, int] = Field(default_factory=dict)
    """cluster -> failed nodes, for the clusters with any."""
    measure: tuple[GateRequest, ...] = ()
    """Fleet-gate measurements due now (the workflow takes them, ``record``s them and decides again)."""


def decide(
    spec: CampaignSpec,
    state: CampaignState,
    reports: Mapping[str, ClusterReport],
    *,
    paused: bool,
    now: datetime,
) -> CampaignDecision:
    """The next step of the campaign."""
    # Only what the rollouts report for this generation counts: an earlier one's failures were
    # the earlier spec's, and a cluster not retargeted yet has not run this one.
    failed = {
        name: r.failed for name, r in sorted(reports.items()) if r.failed and r.generation == state.generation
    }
    total = sum(failed.values())
    if not state.halted and total > spec.failure.max_failed_nodes:
        state = state.model_copy(update={"halted": _halt_reason(failed, spec.failure.max_failed_nodes)})
    if not state.halted:
        state = state.model_copy(update={"halted": _gate_failed(spec, state)})
    if state.halted and spec.failure.action == "rollback":
        returned = all(_phase(reports, c) == ROLLED_BACK for c in state.started)
        phase = CampaignPhase.ROLLED_BACK if returned else CampaignPhase.ROLLING_BACK
        return CampaignDecision(
            state=state, phase=phase, message=state.halted, hold=paused, rollback=state.halted, failed=failed
        )
    if state.halted:
        return CampaignDecision(
            state=state, phase=CampaignPhase.HALTED, message=state.halted, hold=True, failed=failed
        )
    if paused:
        return CampaignDecision(
            state=state, phase=CampaignPhase.PAUSED, message="paused", hold=True, failed=failed
        )
    return _advance(spec, state, reports, now, failed)


def _advance(
    spec: CampaignSpec,
    state: CampaignState,
    reports: Mapping[str, ClusterReport],
    now: datetime,
    failed: dict[str, int],
) -> CampaignDecision:
    """Start what the stage in progress may start; past a completed stage, its gate, then the
    next stage, in the same call."""
    starts: list[str] = []
    while state.stage < len(spec.stages):
        stage = spec.stages[state.stage]
        fresh = _to_start(stage, state, reports)
        if fresh:
            starts += fresh
            state = state.model_copy(update={"started": state.started + tuple(fresh)})
        if not all(_complete(reports, c, state.generation) for c in stage.clusters):
            return _progressing(state, stage, reports, starts, failed)
        done_at = state.stage_done_at or now
        state = state.model_copy(update={"stage_done_at": done_at})
        held = _gate(spec, stage, state, done_at, now)
        if held is not None:
            message, wake_at, measure = held
            return CampaignDecision(
                state=state,
                phase=CampaignPhase.WAITING,
                message=message,
                start=tuple(starts),
                wake_at=wake_at,
                failed=failed,
                measure=measure,
            )
        state = state.model_copy(update={"stage": state.stage + 1, "stage_done_at": None, "gate": ()})
    return CampaignDecision(
        state=state,
        phase=CampaignPhase.COMPLETE,
        message="every cluster complete",
        start=tuple(starts),
        failed=failed,
    )


def _to_start(stage: CampaignStage, state: CampaignState, reports: Mapping[str, ClusterReport]) -> list[str]:
    running = [
        c for c in stage.clusters if c in state.started and not _complete(reports, c, state.generation)
    ]
    room = (stage.max_parallel or len(stage.clusters)) - len(running)
    waiting = [c for c in stage.clusters if c not in state.started]
    return waiting[: max(0, room)]


def _gate(
    spec: CampaignSpec, stage: CampaignStage, state: CampaignState, done_at: datetime, now: datetime
) -> tuple[str, datetime | None, tuple[GateRequest, ...]] | None:
    """What holds the next stage (after the last: completion) once ``stage`` completed: its soak,
    its fleet gate (measured from ``done_at`` on), its approval (None: nothing)."""
    approve = f"(fleetwright campaign approve NAME {stage.name})"
    approved = stage.name in state.approved
    gate = campaigngate.view(spec, stage, state.gate, done_at, now) if stage.checks else None
    measure = gate.due if gate is not None else ()
    gate_wake = gate.wake_at if gate is not None else None
    soak_until = done_at + timedelta(seconds=stage.soak_seconds)
    if now < soak_until:
        measuring = f"; {gate.message}" if gate is not None else ""
        wake_at = min(soak_until, gate_wake) if gate_wake is not None else soak_until
        return f"stage {stage.name} soaks until {soak_until.isoformat()}{measuring}", wake_at, measure
    if gate is not None and gate.outcome is not CheckPhase.SUCCESSFUL:
        held = gate.outcome in HELD
        if not (held and approved):  # a human may pass a hold for Prometheus or an Inconclusive check
            return gate.message + (f" {approve}" if held else ""), gate_wake, measure
    if stage.approval and not approved:
        return f"stage {stage.name} complete: waiting for approval {approve}", None, ()
    return None


def _gate_failed(spec: CampaignSpec, state: CampaignState) -> str:
    """Why the fleet gate of the stage in progress failed ("" if it did not)."""
    began = state.stage_done_at
    if state.stage >= len(spec.stages) or began is None or not spec.stages[state.stage].checks:
        return ""
    shown = campaigngate.view(spec, spec.stages[state.stage], state.gate, began, began)
    return shown.message if shown.outcome is CheckPhase.FAILED else ""


def record(
    spec: CampaignSpec, state: CampaignState, cluster: str, measurement: Measurement, now: datetime
) -> CampaignState:
    """``state`` with a fleet-gate measurement of ``cluster`` taken ``now``."""
    if state.stage >= len(spec.stages):
        return state
    stage = spec.stages[state.stage]
    return state.model_copy(
        update={"gate": campaigngate.took(spec, stage, state.gate, cluster, measurement, now=now)}
    )


def _progressing(
    state: CampaignState,
    stage: CampaignStage,
    reports: Mapping[str, ClusterReport],
    starts: list[str],
    failed: dict[str, int],
) -> CampaignDecision:
    done = sum(1 for c in stage.clusters if _complete(reports, c, state.generation))
    return CampaignDecision(
        state=state,
        phase=CampaignPhase.PROGRESSING,
        message=f"stage {stage.name}: {done}/{len(stage.clusters)} clusters complete",
        start=tuple(starts),
        failed=failed,
    )


def _phase(reports: Mapping[str, ClusterReport], cluster: str) -> str:
    report = reports.get(cluster)
    return report.phase if report is not None else ""


def _complete(reports: Mapping[str, ClusterReport], cluster: str, generation: int) -> bool:
    report = reports.get(cluster)
    return report is not None and report.phase == COMPLETE and report.generation == generation


def _halt_reason(failed: Mapping[str, int], allowed: int) -> str:
    where = ", ".join(f"{cluster}: {count}" for cluster, count in failed.items())
    return (
        f"{sum(failed.values())} failed nodes over the clusters ({where}), more than maxFailedNodes {allowed}"
    )


def approve(spec: CampaignSpec, state: CampaignState, stage: str) -> CampaignState:
    """``stage``'s gate approved (the name must be a stage of ``spec``)."""
    if stage not in {s.name for s in spec.stages}:
        raise ValueError(f"stage {stage!r}: no such stage (stages: {', '.join(s.name for s in spec.stages)})")
    return (
        state if stage in state.approved else state.model_copy(update={"approved": (*state.approved, stage)})
    )


def retarget(state: CampaignState, generation: int) -> CampaignState:
    """A new generation of the Campaign: the stages start over from the first, every gate again,
    and the failure rule counts the new generation's failed nodes only (a halt or a rollback was
    the earlier spec's)."""
    if generation <= state.generation:
        return state
    return CampaignState(generation=generation)


def resume(state: CampaignState) -> CampaignState:
    """A human resumed: a fired failure rule is counted again from the clusters' reports, and a
    fleet gate in progress measures again from the start."""
    return state.model_copy(update={"halted": "", "gate": ()})
