"""The node workflow (``node/<profile>/<node>``): one node's lifecycle for one rollout target.

cordon (only when an interrupt disrupts workloads, or the node gate runs validations) -> wait for
protected pods -> drain -> each stage as a Job with its check -> interrupts (reboot confirmed by a
new boot id) -> record the package state after every stage -> the node gate, when the policy has
one (a node not cordoned yet is cordoned for it, never drained; its validation Jobs one after
another, then its metric checks, one activity per measurement with durable timers between, and
external validators' verdicts; Failed fails the node, Inconclusive waits for ``approve_gate``;
both keep the cordon) -> uncordon what we cordoned -> release
the runtime-required taint (runtime-required profiles; it stays while another such profile is
incomplete here) -> report to the parent. A node worked on under someone else's cordon is
cordoned as ours (and drained again) if they lift theirs before its next stage. A rollback's node
whose gate failed before (``regate``) runs the gate too, and whatever ends its run short of a pass
leaves it cordoned and Failed as ``HardwareSuspect``.

The first status (InProgress) rides on the first activity and the last one (Complete, Failed or
Aborted) on the last, with the node's report to its rollout (``activities.report``): the workflow
completes in the task that learns its last activity finished. All the
node's stages run in one activity (``activities.stages``) that records the package state after
each stage, waits out a reboot inside its interrupt stage and shows the per-stage reports in its
result: a rebooting node that drains needs 4 activities, a node with plain stages 1 (under
someone else's cordon, one activity per stage, so the cordon is checked between stages). Each
activity costs the node workflow tasks and history events, the bulk of what fleetwright costs per
node. An abort cancels the stages' activity, which finishes the running stage and starts no other.

The gate's state and commands are ``nodegate``'s; what a failure means is ``nodeerrors``'.
Orchestration only: every side effect is an activity, and the package state it records is the
``PackageLedger``'s. That record is what makes a restart resume after the last passed stage
instead of re-running it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityCancellationType

from fleetwright.workflows.nodeerrors import (
    GateFailedError,
    NodeDeletedError,
    NodeFailedError,
    activity_failure,
)
from fleetwright.workflows.nodegate import GateRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        NODE_FINISHED_SIGNAL,
        CordonReport,
        CordonRequest,
        DrainRequest,
        NodePhase,
        NodeReport,
        NodeStatusRequest,
        NodeTarget,
        ProtectedPodsRequest,
        RecordStateRequest,
        StageRequest,
        StagesReport,
        StagesRequest,
        StatusNote,
        UncordonRequest,
    )
    from fleetwright.api.keys import NodeReason
    from fleetwright.planner.analysis import CheckState
    from fleetwright.planner.interrupts import InterruptKind
    from fleetwright.planner.ledger import PackageLedger
    from fleetwright.planner.nodestate import NodePackageState
    from fleetwright.planner.nodework import NodeStep
    from fleetwright.planner.observations import RunStatus
    from fleetwright.workflows import retry
    from fleetwright.workflows import search as sa
    from fleetwright.workflows.payloads import NodeInput, NodeResult

A = TypeVar("A")
R = TypeVar("R")
Activity = Callable[[NodeActivities, A], Awaitable[R]]

NODE_WORKFLOW = "fleetwright.node"


@workflow.defn(name=NODE_WORKFLOW)
class NodeWorkflow:
    def __init__(self) -> None:
        self._abort = False
        self._stage = "starting"
        self._cordon: CordonReport | None = None
        self._gate: GateRun | None = None

    @workflow.signal(name="abort")
    def abort(self) -> None:
        """Finish the current stage, start no other, uncordon what we cordoned unless the node's
        health was shown bad (the stages' activity is cancelled: it finishes its running stage)."""
        self._abort = True

    @workflow.query(name="stage")
    def stage(self) -> str:
        return self._stage

    @workflow.update(name="approve_gate")
    def approve_gate(self) -> str:
        """A human passes the node's Inconclusive gate (``fleetwright approve P gate/<node>``)."""
        if self._gate is not None:
            self._gate.approved = True
        return f"approved the health gate of {self._input.node}"

    @approve_gate.validator
    def _validate_approve_gate(self) -> None:
        if self._gate is None or not self._gate.held:
            raise ValueError(
                f"{self._input.node} is not waiting at an Inconclusive health gate ({self._stage})"
            )

    @workflow.query(name="gate")
    def gate(self) -> list[CheckState]:
        """The node gate's checks as they stand."""
        return list(self._gate.states.values()) if self._gate is not None else []

    @workflow.run
    async def run(self, node_input: NodeInput) -> NodeResult:
        self._input = node_input
        self._target = NodeTarget(profile=node_input.profile, node=node_input.node)
        rollout = (node_input.target, node_input.since) if node_input.since is not None else None
        self._ledger = PackageLedger(
            node_input.profile, node_input.records, node_input.work, node_input.desired, rollout
        )
        self._packages = {p.name: p for p in node_input.packages}
        if self._gated():
            # Only inputs of a policy with a node gate have one: no 0.1.0 history does.
            self._gate = GateRun(node_input, aborted=lambda: self._abort, show=self._status, at=self._at)
        # patch gate-quarantine: since 0.2; deprecate_patch in 0.3, remove in 0.4
        self._quarantined = node_input.regate and workflow.patched("gate-quarantine")
        try:
            return await self._update()
        except NodeDeletedError as gone:
            # Wherever it was noticed (even while finishing a failure), a deleted node ends the
            # workflow cleanly: the rollout counts it as having left the fleet, not as failed.
            self._phase("Gone")
            return await self._report(RunStatus.GONE, str(gone))

    def _gated(self) -> bool:
        """The policy has a node gate (no 0.1.0 input has one)."""
        node_input = self._input
        return bool(node_input.gate or node_input.external or node_input.validations)

    def _needs_drain(self) -> bool:
        """Cordon and drain before the stages: an interrupt disrupts workloads, or a validation
        needs the node (its GPUs) to itself."""
        return self._input.work.needs_drain or bool(self._input.validations)

    async def _update(self) -> NodeResult:
        work = self._input.work
        # The first activity (cordon, else the first stage) shows InProgress; with neither, a
        # status activity of its own.
        updating = self._updating()
        first: StatusNote | None = updating
        if not (self._needs_drain() or work.steps):
            await self._status(updating)
            first = None
        try:
            if self._needs_drain():
                await self._prepare_disruption(first)
                first = None
            await self._run_steps(first)
            if self._gate is not None:
                await self._cordon_for_gate()
                await self._gate.run()
        except NodeFailedError as failure:
            return await self._finish_failed(str(failure), held=isinstance(failure, GateFailedError))
        await self._finish(ours=self._ours())
        return self._result(RunStatus.SUCCEEDED, "complete")

    def _ours(self) -> bool:
        """The node is cordoned through our cordon (we lift it at the end)."""
        return self._cordon is not None and self._cordon.ours

    def _last_activity_shows_complete(self) -> bool:
        """Complete rides on the last activity (the uncordon, else the last stage), unless the
        runtime taint's release still follows it."""
        return not self._input.runtime_required

    def _last_stage_shows_complete(self) -> bool:
        """Complete rides on the last stage when nothing follows it: no uncordon, no node gate."""
        return self._last_activity_shows_complete() and not self._ours() and not self._gated()

    def _updating(self) -> StatusNote:
        return StatusNote(phase=NodePhase.IN_PROGRESS, reason=NodeReason.UPDATING, message=self._summary())

    def _completed(self) -> StatusNote:
        """The Complete status, with the node's report: whichever activity shows it sends it."""
        gate = self._gate
        return StatusNote(
            phase=NodePhase.COMPLETE,
            reason=NodeReason.GATE_PASSED if gate is not None else NodeReason.COMPLETE,
            message=self._summary() + (f"; {gate.summary()}" if gate is not None else ""),
            report=self._report_of(RunStatus.SUCCEEDED, "complete"),
        )

    # ----- steps ----------------------------------------------------------------------------
    async def _prepare_disruption(self, first: StatusNote | None) -> None:
        self._stage = "cordon"
        request = CordonRequest(profile=self._input.profile, node=self._input.node, show_before=first)
        self._cordon = await self._call(NodeActivities.cordon, request)
        await self._clear_workloads()

    async def _cordon_for_gate(self) -> None:
        """A node at its gate takes no new work: one not cordoned yet (its change needs no
        interrupt, no validation) is cordoned now, not drained (its pods keep running); the cordon
        is lifted only when the gate passes."""
        if self._cordon is not None:
            return
        # patch gate-cordon: since 0.2; deprecate_patch in 0.3, remove in 0.4
        if not workflow.patched("gate-cordon"):
            return
        self._stage = "cordon-for-gate"
        request = CordonRequest(profile=self._input.profile, node=self._input.node)
        self._cordon = await self._call(NodeActivities.cordon, request)

    async def _keep_cordoned(self) -> None:
        """Under someone else's cordon, before each further stage: if they lifted it meanwhile, the
        node is cordoned again, as ours (so we lift it when done), and drained again (pods may have
        landed on it since). A node this rollout disrupts stays cordoned until its workflow ends."""
        if self._cordon is None or self._cordon.ours:
            return
        self._stage = "re-cordon"
        request = CordonRequest(profile=self._input.profile, node=self._input.node)
        self._cordon = await self._call(NodeActivities.cordon, request)
        if self._cordon.ours:
            workflow.logger.info("%s: its other cordon was lifted mid-update; cordoned it", self._input.node)
            await self._clear_workloads()

    async def _clear_workloads(self) -> None:
        """Wait for protected pods, then drain."""
        selector = self._input.protected_pods
        if selector is not None and (selector.match_labels or selector.match_expressions):
            self._stage = "wait-protected-pods"
            protected = ProtectedPodsRequest(
                profile=self._input.profile,
                node=self._input.node,
                rollout_workflow_id=self._input.parent_workflow_id,
                selector=selector,
                timeout_seconds=self._input.settings.protected_pods_timeout_seconds,
            )
            await self._wait(NodeActivities.wait_protected_pods, protected, protected.timeout_seconds)
        self._stage = "drain"
        drain = DrainRequest(
            profile=self._input.profile,
            node=self._input.node,
            rollout_workflow_id=self._input.parent_workflow_id,
            drain=self._input.drain,
            package_namespace=self._input.settings.package_namespace,
            poll_seconds=self._input.settings.drain_poll_seconds,
        )
        await self._wait(NodeActivities.drain, drain, self._input.drain.timeout_seconds or 7 * 24 * 3600)

    async def _run_steps(self, first: StatusNote | None) -> None:
        """Every stage in one activity; under someone else's cordon one activity per stage, so that
        before each further stage the node is cordoned as ours if they lifted theirs."""
        steps = self._input.work.steps
        foreign = self._cordon is not None and not self._cordon.ours
        groups = [steps[i : i + 1] for i in range(len(steps))] if foreign else [steps] if steps else []
        for index, group in enumerate(groups):
            if index:
                await self._keep_cordoned()
            final = index == len(groups) - 1
            last = self._completed() if final and self._last_stage_shows_complete() else None
            await self._run_group(group, first, last)
            first = None

    async def _run_group(
        self, steps: tuple[NodeStep, ...], first: StatusNote | None, last: StatusNote | None
    ) -> None:
        """Consecutive stages in one activity, each stage's record and the statuses before the first
        and after the last included; an abort cancels it, and it stops once the running stage
        finished."""
        if self._abort:
            raise NodeFailedError("aborted before " + steps[0].stage.value)
        records = self._ledger.states_after([(s.packages, s.stage) for s in steps])
        requests = tuple(
            self._stage_request(
                step, record, first if i == 0 else None, last if i == len(steps) - 1 else None
            )
            for i, (step, record) in enumerate(zip(steps, records, strict=True))
        )
        self._stage = ", ".join(f"{s.stage.value} {s.packages[0]}" for s in steps)
        report = await self._stages(
            StagesRequest(profile=self._input.profile, node=self._input.node, stages=requests)
        )
        for step in steps[: report.passed]:
            for name in step.packages:
                self._ledger.stage_done(name, step.stage)
        if report.passed == len(steps):
            return
        step = steps[report.passed]
        failure = report.failure
        if failure is None:
            # Stopped between stages (an abort) before this one started.
            raise NodeFailedError("aborted before " + step.stage.value)
        for name in step.packages:
            self._ledger.failed(name, f"{step.stage.value}: {failure.message}")
        await self._record()
        raise NodeFailedError(
            f"{step.stage.value} of {step.packages[0]} failed ({failure.outcome}): {failure.message}"
        )

    def _stage_request(
        self,
        step: NodeStep,
        record: NodePackageState,
        first: StatusNote | None,
        last: StatusNote | None,
    ) -> StageRequest:
        """``first`` and ``last``: the statuses shown before and after the stage; ``record``: the
        state it writes once it passed (after the reboot, for a reboot)."""
        settings = self._input.settings
        reboot = step.interrupt is not None and step.interrupt.kind is InterruptKind.REBOOT
        return StageRequest(
            profile=self._input.profile,
            node=self._input.node,
            rollout_workflow_id=self._input.parent_workflow_id,
            profile_uid=self._input.profile_uid,
            generation=self._input.generation,
            package=self._packages[step.packages[0]],
            stage=step.stage,
            interrupt=step.interrupt,
            agent_image=settings.agent_image,
            namespace=settings.package_namespace,
            host_root=settings.host_root,
            node_order=self._input.node_order,
            tolerations=self._input.tolerations,
            pod_labels=settings.stage_pod_labels,
            pod_annotations=settings.stage_pod_annotations,
            backoff_limit=settings.stage_backoff_limit,
            image_pull_timeout_seconds=settings.image_pull_timeout_seconds,
            attempt=self._input.attempt,
            # This run is one pass over the node: its retried activities adopt its own Jobs, a
            # later pass gets its own.
            pass_id=workflow.info().run_id,
            record=record,
            reboot_timeout_seconds=settings.reboot_timeout_seconds if reboot else None,
            show_before=first,
            show_after=last,
        )

    async def _stages(self, request: StagesRequest) -> StagesReport:
        # Each Job's own deadline bounds each attempt; allow its retries plus scheduling slack.
        bound = 0
        for stage in request.stages:
            bound += stage.package.stage_timeout_seconds * 4 + 600
            if stage.stage.is_interrupt:
                bound += self._input.settings.reboot_timeout_seconds
        handle = workflow.start_activity_method(
            NodeActivities.run_stages,
            request,
            start_to_close_timeout=timedelta(seconds=bound + 120),
            heartbeat_timeout=retry.HEARTBEAT,
            retry_policy=retry.LONG_WAIT,
            # An abort cancels it; the activity finishes the running stage and reports.
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=self._summary_of(NodeActivities.run_stages),
        )
        await workflow.wait_condition(lambda: handle.done() or self._abort)
        if not handle.done():
            handle.cancel()
        try:
            return await handle
        except ActivityError as error:
            raise activity_failure(error) from error

    async def _finish(self, *, ours: bool) -> None:
        shown_by_last = self._last_activity_shows_complete()
        if ours:
            show = self._completed() if shown_by_last else None
            await self._call(
                NodeActivities.uncordon,
                UncordonRequest(profile=self._input.profile, node=self._input.node, show_after=show),
            )
        if self._input.runtime_required:
            # Workloads may land once every runtime-required profile is complete here.
            self._stage = "release-runtime-taint"
            await self._call(NodeActivities.release_runtime_taint, self._target)
        if shown_by_last and (ours or (self._input.work.steps and not self._gated())):
            self._phase(NodePhase.COMPLETE.value)
        else:
            await self._status(self._completed())

    async def _finish_failed(self, message: str, *, held: bool = False) -> NodeResult:
        if self._quarantined:
            # Its health was shown bad before: whatever ended this run (the gate again, a stage,
            # an abort), it stays cordoned and Failed until a gate passes or a human releases it.
            message = f"hardware suspect: {message}; {self._quarantine_hint()}"
            await self._status(self._last(NodePhase.FAILED, NodeReason.HARDWARE_SUSPECT, message))
            return self._result(RunStatus.FAILED, message)
        if held:
            # A failed or aborted health gate: the node stays cordoned and Failed, naming the check.
            await self._status(self._last(NodePhase.FAILED, NodeReason.GATE_FAILED, message))
            return self._result(RunStatus.FAILED, message)
        if self._abort:
            # An abort stops between stages and hands the node back to its workloads.
            if self._ours():
                request = UncordonRequest(profile=self._input.profile, node=self._input.node)
                await self._call(NodeActivities.uncordon, request)
            await self._status(self._last(NodePhase.BLOCKED, NodeReason.ABORTED, message))
            return self._result(RunStatus.FAILED, message)
        # A failed node stays cordoned (if we cordoned it) so nothing lands on a half-changed host.
        await self._status(self._last(NodePhase.FAILED, NodeReason.FAILED, message))
        return self._result(RunStatus.FAILED, message)

    def _quarantine_hint(self) -> str:
        """What the message of a quarantined node's failure adds: why, and what ends it."""
        node_input = self._input
        return (
            "its health gate failed on the change the rollback returned it from; kept cordoned "
            f"until a gate passes or `fleetwright release {node_input.profile} {node_input.node}`"
        )

    def _last(self, phase: NodePhase, reason: str, message: str) -> StatusNote:
        """A status the node's workflow ends with, carrying its report (a failure)."""
        report = self._report_of(RunStatus.FAILED, message)
        return StatusNote(phase=phase, reason=reason, message=message, report=report)

    # ----- activity plumbing ----------------------------------------------------------------
    async def _call(self, activity: Activity[A, R], arg: A) -> R:
        """A Kubernetes call: bounded, retried on the API's transient errors."""
        try:
            return await workflow.execute_activity_method(
                activity,
                arg,
                start_to_close_timeout=retry.API_CALL_TIMEOUT,
                retry_policy=retry.API_CALL,
                summary=self._summary_of(activity),
            )
        except ActivityError as error:
            raise activity_failure(error) from error

    async def _wait(self, activity: Activity[A, R], arg: A, bound_seconds: int) -> R:
        """A wait for a state (a drain, a stage's Job): heartbeating, bounded by ``bound_seconds``."""
        try:
            return await workflow.execute_activity_method(
                activity,
                arg,
                start_to_close_timeout=timedelta(seconds=bound_seconds + 120),
                heartbeat_timeout=retry.HEARTBEAT,
                retry_policy=retry.LONG_WAIT,
                summary=self._summary_of(activity),
            )
        except ActivityError as error:
            raise activity_failure(error) from error

    def _summary_of(self, activity: Activity[A, R]) -> str:
        return f"{activity.__name__.replace('_', '-')} {self._input.node}: {self._stage}"

    async def _record(self) -> None:
        state = self._ledger.state()
        request = RecordStateRequest(profile=self._input.profile, node=self._input.node, state=state)
        await self._call(NodeActivities.record_state, request)

    async def _status(self, note: StatusNote) -> None:
        request = NodeStatusRequest(profile=self._input.profile, node=self._input.node, **note.model_dump())
        await self._call(NodeActivities.set_node_status, request)
        self._phase(note.phase.value)

    def _at(self, stage: str) -> None:
        self._stage = stage

    def _phase(self, phase: str) -> None:
        """The phase a status activity showed, for the Temporal UI's search."""
        if self._input.settings.search_attributes:
            sa.upsert([sa.PHASE.value_set(phase)], self._input.unregistered_search_attributes)

    def _outcome(self, status: RunStatus, message: str) -> NodeResult:
        return NodeResult(node=self._input.node, target=self._input.target, status=status, message=message)

    def _result(self, status: RunStatus, message: str) -> NodeResult:
        """The workflow's result; its last activity sent it to the rollout."""
        self._stage = "done"
        return self._outcome(status, message)

    def _report_of(self, status: RunStatus, message: str) -> NodeReport:
        return NodeReport(
            rollout_workflow_id=self._input.parent_workflow_id, result=self._outcome(status, message)
        )

    async def _report(self, status: RunStatus, message: str) -> NodeResult:
        """Signal the result to the rollout from here: only a deleted node's, which no activity
        shows."""
        result = self._result(status, message)
        parent = workflow.get_external_workflow_handle(self._input.parent_workflow_id)
        try:
            await parent.signal(NODE_FINISHED_SIGNAL, result)
        except ApplicationError:
            workflow.logger.warning(
                "parent %s gone; result kept in this workflow", self._input.parent_workflow_id
            )
        return result

    def _summary(self) -> str:
        stages = ", ".join(f"{s.stage.value}({'+'.join(s.packages)})" for s in self._input.work.steps)
        return f"{self._input.profile}: {stages}"
