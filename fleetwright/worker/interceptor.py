"""The worker's activity interceptor: what every activity attempt leaves behind for operators.

It binds the log context (profile, node, stage, package) of the request an activity runs, and
records the activity-level metrics (``worker.metrics``): stage, drain and node-update durations,
stage Job failures, drains held by PodDisruptionBudgets (read from the drain's heartbeats, which
name each blocker's reason), node gates (from the statuses shown) and fleet gates (from the
outcomes a rollout decision reached). It never changes an activity's input, result or error.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ActivityOutboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from fleetwright.activities.payloads import (
    NAMES,
    DecideReport,
    DecideRequest,
    DrainReport,
    NodePhase,
    NodeStatusRequest,
    StagesReport,
    StagesRequest,
    StatusNote,
)
from fleetwright.api.keys import NodeReason
from fleetwright.planner.health.analysis import CheckPhase, Measurement
from fleetwright.process import logs, metrics
from fleetwright.stagejob.outcome import StageReport

# Node workflow id -> monotonic time of its first "InProgress" status in this process.
_node_started: dict[str, float] = {}
# (profile, node) -> the reason its drain is held by, as its last heartbeat said.
_drain_blocked: dict[tuple[str, str], str] = {}


def request_fields(args: Sequence[Any]) -> dict[str, str]:
    """profile, node, stage and package of an activity request (the first argument)."""
    if not args:
        return {}
    request = args[0]
    fields: dict[str, str] = {}
    for name in ("profile", "node"):
        value = getattr(request, name, None)
        if isinstance(value, str):
            fields[name] = value
    stage = getattr(request, "stage", None)
    if stage is not None:
        # A preflight's check is no stage of the update: its failure sends the node down the normal path.
        preflight = "-preflight" if getattr(request, "preflight", False) is True else ""
        fields["stage"] = str(getattr(stage, "value", stage)) + preflight
    package = getattr(request, "package", None)
    if package is not None and hasattr(package, "name"):
        fields["package"] = f"{package.name}@{getattr(package, 'version', '')}"
    return fields


def blocker_reason(description: str) -> str:
    """``ns/pod: Reason (message)`` (a drain heartbeat's blocker) -> ``Reason``."""
    _, _, rest = description.partition(": ")
    return rest.partition(" (")[0].strip() or "Unknown"


def drain_heartbeat(profile: str, node: str, details: Sequence[Any]) -> None:
    """Track which drains are held and why, from the drain activity's heartbeat details."""
    blocked = details[0].get("blocked") if details and isinstance(details[0], Mapping) else None
    key = (profile, node)
    before = _drain_blocked.pop(key, None)
    if blocked:
        _drain_blocked[key] = blocker_reason(str(blocked[0]))
    _publish_drains(profile, before)


def drain_ended(profile: str, node: str) -> None:
    _publish_drains(profile, _drain_blocked.pop((profile, node), None))


def _publish_drains(profile: str, before: str | None) -> None:
    reasons = {*metrics.DRAIN_REASONS, *([before] if before else [])}
    reasons |= {r for (p, _), r in _drain_blocked.items() if p == profile}
    for reason in reasons:
        held = sum(1 for (p, _), r in _drain_blocked.items() if p == profile and r == reason)
        metrics.DRAINS_BLOCKED.labels(profile, reason).set(held)


def record_result(
    name: str, fields: Mapping[str, str], result: Any, seconds: float, outcome: str, *, request: Any = None
) -> None:
    """The metrics of one finished activity attempt (``request``: its first argument)."""
    profile = fields.get("profile", "")
    metrics.ACTIVITY_DURATION.labels(name, outcome).observe(seconds)
    if isinstance(request, StagesRequest) and isinstance(result, StagesReport):
        ran = request.stages[result.resumed : result.resumed + len(result.reports)]
        for stage, report in zip(ran, result.reports, strict=True):
            record_stage(request_fields([stage]), report)
    elif isinstance(result, Measurement):
        metrics.HEALTH_MEASUREMENTS.labels(profile, result.check, result.phase.value).inc()
    elif isinstance(request, DecideRequest) and isinstance(result, DecideReport):
        record_fleet_gates(request.state.spec.profile, result)
    elif name == NAMES.DRAIN:
        metrics.DRAIN_DURATION.labels(profile, outcome).observe(seconds)
        drain_ended(profile, fields.get("node", ""))
        if isinstance(result, DrainReport):
            metrics.DRAIN_BLOCKED_SECONDS.labels(profile).inc(result.blocked_seconds)


PHASE_OUTCOMES = {
    CheckPhase.SUCCESSFUL: "passed",
    CheckPhase.FAILED: "failed",
    CheckPhase.INCONCLUSIVE: "inconclusive",
    CheckPhase.MONITORING_UNAVAILABLE: "monitoring_unavailable",
}


def record_fleet_gates(profile: str, report: DecideReport) -> None:
    """The fleet gates (soak, batches) a rollout decision saw end or begin a hold."""
    for reached in report.decision.fleet_gates:
        count_gate(profile, reached.step, PHASE_OUTCOMES[reached.outcome])


def count_gate(profile: str, gate: str, outcome: str) -> None:
    """One more ``outcome`` of a ``gate`` (node, soak, batches) of ``profile``."""
    for each in metrics.GATE_OUTCOMES:  # zero until the first of each, as dashboards expect
        metrics.HEALTH_GATES.labels(profile, gate, each)
    metrics.HEALTH_GATES.labels(profile, gate, outcome).inc()


GATE_REASONS = {
    NodeReason.GATE_PASSED: "passed",
    NodeReason.GATE_FAILED: "failed",
    NodeReason.GATE_INCONCLUSIVE: "inconclusive",
    NodeReason.MONITORING_UNAVAILABLE: "monitoring_unavailable",
}


def record_gate(profile: str, request: object, outcome: str) -> None:
    """A node gate's end, from the status a finished activity showed (its reason)."""
    if outcome != "succeeded":
        return
    notes = [getattr(request, "show_before", None), getattr(request, "show_after", None)]
    if isinstance(request, NodeStatusRequest):
        notes.append(StatusNote(phase=request.phase, reason=request.reason))
    for note in notes:
        if isinstance(note, StatusNote) and _gate_ended(note):
            count_gate(profile, "node", GATE_REASONS[note.reason])
        if isinstance(note, StatusNote):
            record_suspect(profile, str(getattr(request, "node", "")), note.reason)


def _gate_ended(note: StatusNote) -> bool:
    """A status that ends a node gate or begins its hold: MonitoringUnavailable counts only once
    the node is held (Blocked, past consecutiveErrorLimit), not while it names the first Errors."""
    if note.reason == NodeReason.MONITORING_UNAVAILABLE:
        return note.phase is NodePhase.BLOCKED
    return note.reason in GATE_REASONS


def record_suspect(profile: str, node: str, reason: str) -> None:
    """A node shown hardware suspect is 1 in ``fleetwright_node_hardware_suspect`` until a later
    status of the profile on it says otherwise (a passed gate, a release)."""
    if not node:
        return
    if reason == NodeReason.HARDWARE_SUSPECT:
        metrics.HARDWARE_SUSPECT.labels(profile, node).set(1)
        return
    with contextlib.suppress(KeyError):  # it was never suspect here
        metrics.HARDWARE_SUSPECT.remove(profile, node)


def record_stage(fields: Mapping[str, str], report: StageReport) -> None:
    """One stage's outcome and (when its Job says when it ran) its duration."""
    profile, package, stage = fields.get("profile", ""), fields.get("package", ""), fields.get("stage", "")
    package = package.split("@", 1)[0]
    outcome = report.outcome.value
    for failure in metrics.STAGE_FAILURE_OUTCOMES:  # zero until the first failure, as dashboards expect
        metrics.STAGE_JOB_FAILURES.labels(profile, package, stage, failure)
    if outcome in metrics.STAGE_FAILURE_OUTCOMES:
        metrics.STAGE_JOB_FAILURES.labels(profile, package, stage, outcome).inc()
    if report.started_at and report.finished_at:
        seconds = (report.finished_at - report.started_at).total_seconds()
        metrics.STAGE_DURATION.labels(profile, package, stage, outcome).observe(seconds)


def record_node_status(workflow_id: str, profile: str, phase: NodePhase) -> None:
    """A node update's duration: from its first InProgress status to Complete or Failed (seen by
    this process; a node that started under another worker replica is not measured)."""
    if phase is NodePhase.IN_PROGRESS:
        _node_started.setdefault(workflow_id, time.monotonic())
    elif phase in (NodePhase.COMPLETE, NodePhase.FAILED):
        started = _node_started.pop(workflow_id, None)
        if started is not None:
            outcome = "succeeded" if phase is NodePhase.COMPLETE else "failed"
            metrics.NODE_UPDATE_DURATION.labels(profile, outcome).observe(time.monotonic() - started)


def shown_before(activity_type: str, request: object) -> NodePhase | None:
    """The node status an activity shows before its work: a status write's own, or the one another
    activity carries (the node's first status rides on its first activity)."""
    if activity_type == NAMES.SET_NODE_STATUS:
        phase = getattr(request, "phase", None)
        return phase if isinstance(phase, NodePhase) else None
    if isinstance(request, StagesRequest):
        request = request.stages[0]
    return _phase(getattr(request, "show_before", None))


def shown_after(request: object, result: object) -> NodePhase | None:
    """The node status an activity showed once its work was done (stages that did not all pass
    show none)."""
    if isinstance(request, StagesRequest):
        if not isinstance(result, StagesReport) or result.passed < len(request.stages):
            return None
        request = request.stages[-1]
    return _phase(getattr(request, "show_after", None))


def _phase(note: object) -> NodePhase | None:
    return note.phase if isinstance(note, StatusNote) else None


class _Inbound(ActivityInboundInterceptor):
    def init(self, outbound: ActivityOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        fields = request_fields(input.args)
        request = input.args[0] if input.args else None
        workflow_id, profile = info.workflow_id or "", fields.get("profile", "")
        before = shown_before(info.activity_type, request)
        if before is not None:
            record_node_status(workflow_id, profile, before)
        started = time.monotonic()
        outcome, result = "failed", None
        with logs.bind(**fields):
            try:
                result = await super().execute_activity(input)
                outcome = "succeeded"
                after = shown_after(request, result)
                if after is not None:
                    record_node_status(workflow_id, profile, after)
                return result
            finally:
                seconds = time.monotonic() - started
                record_result(info.activity_type, fields, result, seconds, outcome, request=request)
                record_gate(profile, request, outcome)


class _Outbound(ActivityOutboundInterceptor):
    def heartbeat(self, *details: Any) -> None:
        info = activity.info()
        if info.activity_type == NAMES.DRAIN:
            parts = (info.workflow_id or "").split("/")
            if len(parts) == 3:
                drain_heartbeat(parts[1], parts[2], details)
        super().heartbeat(*details)


class ActivityInterceptor(Interceptor):
    """Worker interceptor: log context and metrics for every activity attempt."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)
