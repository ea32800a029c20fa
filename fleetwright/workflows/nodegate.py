"""The node gate of a node workflow: after the node's last stage and before its cordon is lifted,
its validation containers one after another (one activity each, a Job on the node), then every
metric check of the policy's node gate (one activity per measurement, a durable timer between two)
and every external validator's verdict; then the node passes, fails (``GateFailedError``: it stays
cordoned) or waits, named, for a human's ``approve_gate``. While Prometheus does not answer (a
check's Errors in a row) the gate is named MonitoringUnavailable from the first Error, measuring on
at the check's interval; past ``consecutiveErrorLimit`` the node is held (Blocked); the first
answer lifts the hold by itself, and ``approve_gate`` or an abort end it too.

Owns the gate's state (each validation's verdict, each check's measurements, the external verdicts,
the wait for approval) and its commands; the node workflow owns the node's stages, status and
cordon. Orchestration only: each validation, measurement and verdict is an activity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

from fleetwright.workflows.nodeerrors import GateFailedError, activity_failure

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.health import HealthActivities
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        ExternalVerdict,
        ExternalWaitRequest,
        MeasureRequest,
        NodePhase,
        StatusNote,
        ValidationRequest,
    )
    from fleetwright.api.health import ExternalValidator, MetricCheck, ValidationContainer, nodes_alternation
    from fleetwright.api.keys import NodeReason
    from fleetwright.planner.health import analysis
    from fleetwright.planner.health.analysis import CheckState, Measurement
    from fleetwright.stagejob.validation import ValidationReport
    from fleetwright.workflows import retry
    from fleetwright.workflows.payloads import NodeInput


R = TypeVar("R")


NAMED_PATCH = "monitoring-named"
"""Name a Prometheus outage from a check's first Error (0.2.0 named it only once held)."""


class GateRun:
    """One node workflow's gate. ``aborted`` reads the workflow's abort, ``show`` publishes a node
    status (an activity) and ``at`` names the workflow's current stage. ``rerun`` numbers a
    quarantined node's later runs of its gate (``workflows.quarantine``): each is a pass of its own
    (its validation Jobs, its external verdicts since it began), shows no status of its own before
    a measurement or validation (the quarantine shows one per run), and ends an Inconclusive gate
    as not passed instead of waiting for a human."""

    def __init__(
        self,
        node_input: NodeInput,
        *,
        aborted: Callable[[], bool],
        show: Callable[[StatusNote], Awaitable[None]],
        at: Callable[[str], None],
        rerun: int = 0,
    ) -> None:
        self._input = node_input
        self._aborted = aborted
        self._show = show
        self._at = at
        self._rerun = rerun
        self.states: dict[str, CheckState] = {}
        self._verdicts: dict[str, ExternalVerdict | None] = {}
        self.validated: dict[str, ValidationReport | None] = {}
        self._since: datetime | None = None
        self.held = False
        self.approved = False
        self._unavailable = False
        self._shown_unavailable: tuple[tuple[str, analysis.CheckPhase, int], ...] = ()

    async def run(self) -> None:
        """The validations one after another, then every check of the node gate, together, each
        measurement one activity and a timer between two; then pass, fail (GateFailedError) or
        wait for a human (Inconclusive)."""
        checks = self._input.gate
        self._since = workflow.now()
        if self._input.validations:
            await self._validate()
        self._at("health-gate")
        self.states = {c.name: analysis.judge(c, ()) for c in checks}
        self._verdicts = {v.name: None for v in self._input.external}
        await asyncio.gather(
            *(self._run_check(c) for c in checks), *(self._await_verdict(v) for v in self._input.external)
        )
        if self._aborted():
            raise GateFailedError(f"aborted during the health gate; {self.summary()}")
        rejected = [v for v in self._verdicts.values() if v is not None and not v.passed]
        if rejected:
            raise GateFailedError(f"health gate failed: {self.summary()}")
        if self.approved:  # while Prometheus did not answer
            self.held = False
            workflow.set_current_details("")
            self._at("health-gate-approved")
            return
        outcome = analysis.gate_outcome(self.states.values())
        if outcome is analysis.CheckPhase.FAILED:
            raise GateFailedError(f"health gate failed: {self.summary(outcome)}")
        if outcome is analysis.CheckPhase.INCONCLUSIVE and self._rerun:
            raise GateFailedError(f"health gate inconclusive: {self.summary(outcome)}")
        if outcome is analysis.CheckPhase.INCONCLUSIVE:
            await self._hold_inconclusive()

    async def _validate(self) -> None:
        """Each validation container in order, one activity each; the first that fails raises
        GateFailedError naming it (the node stays cordoned, nothing else is measured)."""
        self.validated = {v.name: None for v in self._input.validations}
        for index, validation in enumerate(self._input.validations):
            if self._aborted():
                raise GateFailedError(f"aborted during the health gate; {self.summary()}")
            self._at(f"validate {validation.name}")
            report = await self._run_validation(validation, index)
            self.validated[validation.name] = report
            if not report.passed:
                raise GateFailedError(f"health gate failed: {self.summary()}")

    async def _run_validation(self, validation: ValidationContainer, index: int) -> ValidationReport:
        """One validation's Job to its verdict (a heartbeating wait); an abort cancels the wait."""
        settings, node = self._input.settings, self._input.node
        count = len(self._input.validations)
        request = self._validation_request(validation, f"({index + 1}/{count})")
        bound = validation.timeout_seconds + settings.image_pull_timeout_seconds + 600
        handle = workflow.start_activity_method(
            NodeActivities.run_validation,
            request,
            start_to_close_timeout=timedelta(seconds=bound),
            heartbeat_timeout=retry.heartbeat(self._input.settings),
            retry_policy=retry.LONG_WAIT,
            summary=f"run-validation {node}: {validation.name} {index + 1}/{count}",
        )
        report = await _finished(handle, self._aborted)
        if report is None:
            raise GateFailedError(f"aborted during validation {validation.name}; {self.summary()}")
        return report

    def _validation_request(self, validation: ValidationContainer, position: str) -> ValidationRequest:
        """The Job of ``validation`` in this pass, and the status naming it while it runs."""
        settings = self._input.settings
        running = f"running validation {validation.name} {position}; {self.summary()}"
        return ValidationRequest(
            profile=self._input.profile,
            node=self._input.node,
            rollout_workflow_id=self._input.parent_workflow_id,
            generation=self._input.generation,
            validation=validation,
            namespace=settings.package_namespace,
            host_root=settings.host_root,
            tolerations=self._input.tolerations,
            pod_labels=settings.stage_pod_labels,
            pod_annotations=settings.stage_pod_annotations,
            attempt=self._input.attempt,
            # This run is one pass over the node: its retried activity adopts its own Job.
            pass_id=workflow.info().run_id + (f"/rerun-{self._rerun}" if self._rerun else ""),
            image_pull_timeout_seconds=settings.image_pull_timeout_seconds,
            show_before=None
            if self._rerun
            else StatusNote(phase=NodePhase.IN_PROGRESS, reason=NodeReason.HEALTH_GATE, message=running),
        )

    async def _run_check(self, check: MetricCheck) -> None:
        """Measure ``check`` until its outcome ends it: an Error uses up nothing, the measurement
        is taken again one interval on, also while the check holds the gate MonitoringUnavailable.
        No 0.1.0 history reaches this (no 0.1.0 input has a node gate): no patch marker."""
        measurements: list[Measurement] = []
        wait = analysis.gap_before(check, 0)
        while True:
            if wait and not await self._sleep(wait, f"{check.name}: next measurement"):
                return
            if self._stopped():
                return
            taken = await self._measure(check, self.states[check.name])
            measurements = analysis.recorded(check, measurements, taken)
            self.states[check.name] = analysis.judge(check, measurements)
            await self._follow_monitoring(check)
            if self.states[check.name].outcome in analysis.ENDED:
                return
            wait = analysis.gap_before(check, self.states[check.name].measured)

    def _stopped(self) -> bool:
        """An abort, an approval while Prometheus did not answer, a check's outcome that ends the
        gate (Failed, Inconclusive) or an external validator's rejection."""
        ends = (analysis.CheckPhase.FAILED, analysis.CheckPhase.INCONCLUSIVE)
        rejected = any(v is not None and not v.passed for v in self._verdicts.values())
        return (
            self._aborted()
            or self.approved
            or rejected
            or any(s.outcome in ends for s in self.states.values())
        )

    async def _follow_monitoring(self, check: MetricCheck) -> None:
        """Name the wait MonitoringUnavailable from a check's first Error in a row (the node still
        InProgress), hold the node (Blocked) once a check's Errors passed its
        ``consecutiveErrorLimit``, and name the gate again once every check had an answer. A
        status is shown only when what it says changes: per Error up to the limit, then once."""
        waiting = [s for s in self.states.values() if s.errors_in_a_row and s.outcome not in analysis.ENDED]
        shown = tuple((s.check, s.outcome, s.errors_in_a_row) for s in waiting)
        # patch monitoring-named: since 0.3; deprecate_patch in 0.4, remove in 0.5
        if not workflow.patched(NAMED_PATCH):
            # A gate 0.2.0 ran: named only once held, a status shown when the hold begins or ends.
            waiting = [s for s in waiting if s.outcome is analysis.CheckPhase.MONITORING_UNAVAILABLE]
            shown = (("", analysis.CheckPhase.MONITORING_UNAVAILABLE, 0),) if waiting else ()
        if shown == self._shown_unavailable or self._stopped():
            return
        self._shown_unavailable = shown
        self._unavailable = bool(waiting)
        self.held = any(s.outcome is analysis.CheckPhase.MONITORING_UNAVAILABLE for s in waiting)
        if waiting:
            self._at("health-gate-monitoring-unavailable")
            message = self._unavailable_message(check)
            workflow.set_current_details(message)
            phase = NodePhase.BLOCKED if self.held else NodePhase.IN_PROGRESS
            reason = NodeReason.MONITORING_UNAVAILABLE
            await self._show(StatusNote(phase=phase, reason=reason, message=message))
            return
        self._at("health-gate")
        workflow.set_current_details("")
        await self._show(
            StatusNote(phase=NodePhase.IN_PROGRESS, reason=NodeReason.HEALTH_GATE, message=self.summary())
        )

    def _unavailable_message(self, check: MetricCheck) -> str:
        node, profile = self._input.node, self._input.profile
        shown = analysis.unavailable_checks(self._input.gate, self.states.values())
        human = f", or `fleetwright approve {profile} gate/{node}` (or abort)" if self.held else ""
        return (
            f"health gate MonitoringUnavailable: {shown}; measuring every {check.interval_seconds}s "
            f"until Prometheus answers{human}"
        )

    async def _await_verdict(self, validator: ExternalValidator) -> None:
        """One external validator's verdict (a heartbeating wait, bounded by its timeout); cancelled
        when the gate stops otherwise."""
        request = ExternalWaitRequest(
            profile=self._input.profile,
            node=self._input.node,
            validator=validator,
            since=self._since if self._rerun and self._since is not None else workflow.info().start_time,
        )
        handle = workflow.start_activity_method(
            HealthActivities.wait_external,
            request,
            start_to_close_timeout=timedelta(seconds=validator.timeout_seconds + 120),
            heartbeat_timeout=retry.heartbeat(self._input.settings),
            retry_policy=retry.LONG_WAIT,
            summary=f"wait-external {self._input.node}: {validator.name}",
        )
        verdict = await _finished(handle, self._stopped)
        if verdict is not None:
            self._verdicts[validator.name] = verdict

    async def _sleep(self, seconds: int, summary: str) -> bool:
        """A durable timer, cut short when the gate stops; whether it ran out."""
        try:
            await workflow.wait_condition(
                self._stopped, timeout=timedelta(seconds=seconds), timeout_summary=summary
            )
        except TimeoutError:
            return True
        return False

    async def _measure(self, check: MetricCheck, state: CheckState) -> Measurement:
        node = self._input.node
        batch = self._input.batch or (node,)
        request = MeasureRequest(
            profile=self._input.profile,
            node=node,
            check=check,
            placeholders={
                "node": node,
                "nodes": nodes_alternation(batch),
                "profile": self._input.profile,
            },
            # While held, the status keeps naming the hold until an answer lifts it.
            show_before=None
            if self._unavailable or self._rerun
            else StatusNote(
                phase=NodePhase.IN_PROGRESS, reason=NodeReason.HEALTH_GATE, message=self.summary()
            ),
        )
        try:
            return await workflow.execute_activity_method(
                HealthActivities.measure,
                request,
                start_to_close_timeout=retry.API_CALL_TIMEOUT,
                retry_policy=retry.API_CALL,
                summary=f"measure {node}: {check.name} {state.counted + 1}/{check.count}",
            )
        except ActivityError as error:
            raise activity_failure(error) from error

    async def _hold_inconclusive(self) -> None:
        """Wait, cordoned and named, for ``fleetwright approve P gate/<node>`` or an abort."""
        node, profile = self._input.node, self._input.profile
        self._at("health-gate-inconclusive")
        message = (
            f"health gate inconclusive: {self.summary(analysis.CheckPhase.INCONCLUSIVE)}; waiting for "
            f"`fleetwright approve {profile} gate/{node}` (or abort)"
        )
        await self._show(
            StatusNote(phase=NodePhase.BLOCKED, reason=NodeReason.GATE_INCONCLUSIVE, message=message)
        )
        self.held = True
        workflow.set_current_details(message)
        await workflow.wait_condition(
            lambda: self.approved or self._aborted(), timeout_summary=f"approve gate/{node}"
        )
        self.held = False
        workflow.set_current_details("")
        if not self.approved:
            raise GateFailedError(f"aborted while the health gate was inconclusive: {self.summary()}")
        self._at("health-gate-approved")

    def summary(self, only: analysis.CheckPhase | None = None) -> str:
        """The gate's checks (only those with outcome ``only``, when given) and how long it ran."""
        states = [s for s in self.states.values() if only is None or s.outcome is only]
        ran = ""
        if self._since is not None:
            ran = f" for {int((workflow.now() - self._since).total_seconds())}s"
        approved = ", approved by a human" if self.approved else ""
        parts = [self._validated(name) for name in self.validated] if only is None else []
        parts += [s.describe() for s in states]
        if only is None:
            parts += [
                f"{name} {'waiting' if v is None else ('passed' if v.passed else 'failed')}"
                + (f": {v.message}" if v is not None else "")
                for name, v in self._verdicts.items()
            ]
        return f"health gate{ran}{approved}: " + "; ".join(parts)

    def _validated(self, name: str) -> str:
        """One validation's verdict so far, for the summary."""
        report = self.validated[name]
        if report is None:
            return f"validation {name} waiting"
        return report.message if not report.passed else f"validation {name} passed"


async def _finished(handle: workflow.ActivityHandle[R], stop: Callable[[], bool]) -> R | None:
    """The activity's result, or None when ``stop`` held first (the activity is then cancelled)."""
    await workflow.wait_condition(lambda: handle.done() or stop())
    if not handle.done():
        handle.cancel()
        return None
    try:
        return await handle
    except ActivityError as error:
        raise activity_failure(error) from error
