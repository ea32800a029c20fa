"""The node workflow (``node/<profile>/<node>``): one node's lifecycle for one rollout target.

cordon (only when an interrupt disrupts workloads) -> wait for protected pods -> drain -> each
stage as a Job with its check -> interrupts (reboot confirmed by a new boot id) -> record the
package state after every stage -> uncordon what we cordoned -> release the runtime-required
taint (runtime-required profiles; it stays while another such profile is incomplete here) ->
report to the parent.

The first status (InProgress) rides on the first activity and Complete on the last one, each
stage's activity records the package state once the stage passed, and a reboot's boot id read and
wait run inside its interrupt stage's activity: a rebooting node that drains needs 7 activities, a
node with two plain stages 2. Each activity costs a workflow task that queues behind every other
node's on the worker.

Orchestration only: every side effect is an activity. The package state recorded after each stage
is what makes a restart resume after the last passed stage instead of re-running it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.payloads import (
        NAMES,
        CordonReport,
        CordonRequest,
        DrainReport,
        DrainRequest,
        NodePhase,
        NodeStatusRequest,
        NodeTarget,
        ProtectedPodsRequest,
        RecordStateRequest,
        RuntimeTaintReport,
        StageRequest,
        StatusNote,
        UncordonRequest,
    )
    from fleetwright.api.keys import NodeReason
    from fleetwright.api.nodeprofile import Package
    from fleetwright.planner.interrupts import InterruptKind
    from fleetwright.planner.nodestate import NodePackageState, PackageRecord, PendingChange
    from fleetwright.planner.nodework import NodeStep, PackageWork
    from fleetwright.planner.observations import RunStatus
    from fleetwright.planner.stages import Action, Stage
    from fleetwright.stagejob.outcome import StageReport
    from fleetwright.workflows import retry
    from fleetwright.workflows import search as sa
    from fleetwright.workflows.payloads import NodeInput, NodeResult

T = TypeVar("T")

NODE_WORKFLOW = "fleetwright.node"
NODE_FINISHED_SIGNAL = "node_finished"


def node_workflow_id(profile: str, node: str) -> str:
    return f"node/{profile}/{node}"


class NodeFailedError(Exception):
    """A stage (or a bounded wait before it) failed on this node; the message says which and why."""


class NodeDeletedError(Exception):
    """The Node was deleted: nothing is left to update, show or undo on it."""


NODE_GONE = "NodeGone"  # the ApplicationError type of fleetwright.errors.NodeGoneError


class PackageLedger:
    """The node's package state as this workflow advances it (pure bookkeeping, no I/O)."""

    def __init__(self, node_input: NodeInput) -> None:
        self.profile = node_input.profile
        self.records: dict[str, PackageRecord] = dict(node_input.records)
        self.works = {w.package: w for w in node_input.work.packages}
        self.desired = {p.name: p for p in node_input.desired}

    def state(self) -> NodePackageState:
        return NodePackageState(profile=self.profile, packages=dict(sorted(self.records.items())))

    def _pending(self, package: str) -> PendingChange:
        work = self.works[package]
        record = self.records.get(package, PackageRecord())
        want_version = work.to_version or record.version or ""
        want_config = dict(self.desired[package].config) if package in self.desired else {}
        # A pending change toward this very target carries the stages already done (by this run or
        # by an earlier one that was interrupted); anything else starts the change afresh.
        pending = record.pending
        if pending is not None and pending.version == want_version and pending.config == want_config:
            return pending
        return PendingChange(version=want_version, config=want_config, stages=work.stages)

    def stage_done(self, package: str, stage: Stage) -> None:
        pending = self._pending(package)
        done = (*pending.done, stage) if stage not in pending.done else pending.done
        pending = pending.model_copy(update={"done": done, "failed": None})
        record = self.records.get(package, PackageRecord())
        if pending.remaining():
            self.records[package] = record.model_copy(update={"pending": pending})
        else:
            self.records[package] = self._completed(self.works[package], pending)

    def _completed(self, work: PackageWork, pending: PendingChange) -> PackageRecord:
        if work.action is Action.UNINSTALL:
            return PackageRecord()
        return PackageRecord(version=pending.version, config=pending.config)

    def state_after(self, packages: tuple[str, ...], stage: Stage) -> NodePackageState:
        """The state once ``stage`` of ``packages`` is done, without recording that it is."""
        kept = dict(self.records)
        for package in packages:
            self.stage_done(package, stage)
        after, self.records = self.state(), kept
        return after

    def failed(self, package: str, message: str) -> None:
        pending = self._pending(package).model_copy(update={"failed": message[:500]})
        record = self.records.get(package, PackageRecord())
        self.records[package] = record.model_copy(update={"pending": pending})


@workflow.defn(name=NODE_WORKFLOW)
class NodeWorkflow:
    def __init__(self) -> None:
        self._abort = False
        self._stage = "starting"

    @workflow.signal(name="abort")
    def abort(self) -> None:
        """Finish the current stage, start no other, uncordon what we cordoned."""
        self._abort = True

    @workflow.query(name="stage")
    def stage(self) -> str:
        return self._stage

    @workflow.run
    async def run(self, node_input: NodeInput) -> NodeResult:
        try:
            return await self._update(node_input)
        except NodeDeletedError as gone:
            # Wherever it was noticed (even while finishing a failure), a deleted node ends the
            # workflow cleanly: the rollout counts it as having left the fleet, not as failed.
            if node_input.settings.search_attributes:
                workflow.upsert_search_attributes([sa.PHASE.value_set("Gone")])
            return await self._report(RunStatus.GONE, str(gone))

    async def _update(self, node_input: NodeInput) -> NodeResult:
        self._input = node_input
        self._target = NodeTarget(profile=node_input.profile, node=node_input.node)
        self._ledger = PackageLedger(node_input)
        self._packages = {p.name: p for p in node_input.packages}
        if node_input.settings.search_attributes:
            workflow.upsert_search_attributes(
                [
                    sa.PROFILE.value_set(node_input.profile),
                    sa.NODE.value_set(node_input.node),
                    sa.PHASE.value_set("InProgress"),
                    sa.PACKAGES.value_set([f"{p.name}@{p.version}" for p in node_input.packages]),
                ]
            )
        work = node_input.work
        updating = StatusNote(
            phase=NodePhase.IN_PROGRESS, reason=NodeReason.UPDATING, message=self._summary()
        )
        # The first activity (cordon, else the first stage) shows it; until then: not shown yet.
        first: StatusNote | None = updating
        if not (work.needs_drain or work.steps):
            await self._status(updating)
            first = None
        # Complete rides on the last activity (the uncordon, else the last stage), unless the
        # runtime taint's release still follows it.
        carried = not node_input.runtime_required
        cordon: CordonReport | None = None
        try:
            if work.needs_drain:
                cordon = await self._prepare_disruption(first)
                first = None
            ours = cordon is not None and cordon.ours
            for index, step in enumerate(work.steps):
                if self._abort:
                    raise NodeFailedError("aborted before " + step.stage.value)
                last = carried and not ours and index == len(work.steps) - 1
                await self._run_step(step, first, self._completed() if last else None)
                first = None
        except NodeFailedError as failure:
            return await self._finish_failed(str(failure), cordon)
        if ours:
            request = UncordonRequest(
                profile=node_input.profile,
                node=node_input.node,
                show_after=self._completed() if carried else None,
            )
            await self._call(NAMES.UNCORDON, request, result_type=bool)
        if node_input.runtime_required:
            # Workloads may land once every runtime-required profile is complete here.
            self._stage = "release-runtime-taint"
            await self._call(NAMES.RELEASE_RUNTIME_TAINT, self._target, result_type=RuntimeTaintReport)
        if carried and (ours or work.steps):
            self._phase(NodePhase.COMPLETE)
        else:
            await self._status(self._completed())
        return await self._report(RunStatus.SUCCEEDED, "complete")

    def _completed(self) -> StatusNote:
        return StatusNote(phase=NodePhase.COMPLETE, reason=NodeReason.COMPLETE, message=self._summary())

    # ----- steps ----------------------------------------------------------------------------
    async def _prepare_disruption(self, first: StatusNote | None) -> CordonReport:
        self._stage = "cordon"
        cordon = await self._call(
            NAMES.CORDON,
            CordonRequest(profile=self._input.profile, node=self._input.node, show_before=first),
            result_type=CordonReport,
        )
        selector = self._input.protected_pods
        if selector is not None and (selector.match_labels or selector.match_expressions):
            self._stage = "wait-protected-pods"
            request = ProtectedPodsRequest(
                profile=self._input.profile,
                node=self._input.node,
                selector=selector,
                timeout_seconds=self._input.settings.protected_pods_timeout_seconds,
            )
            await self._wait(NAMES.WAIT_PROTECTED_PODS, request, None, request.timeout_seconds)
        self._stage = "drain"
        drain = DrainRequest(
            profile=self._input.profile,
            node=self._input.node,
            drain=self._input.drain,
            poll_seconds=self._input.settings.drain_poll_seconds,
        )
        bound = self._input.drain.timeout_seconds or 7 * 24 * 3600
        await self._wait(NAMES.DRAIN, drain, DrainReport, bound)
        return cordon

    async def _run_step(self, step: NodeStep, first: StatusNote | None, last: StatusNote | None) -> None:
        """One stage; ``first`` and ``last``: the statuses its activity shows before and after."""
        package = self._packages[step.packages[0]]
        self._stage = f"{step.stage.value} {package.name}"
        reboot = step.interrupt is not None and step.interrupt.kind is InterruptKind.REBOOT
        # The stage's activity records the state once the stage succeeded (after the reboot, for a
        # reboot), and shows ``first`` and ``last``: one activity per stage.
        request = self._stage_request(
            step,
            package,
            self._ledger.state_after(step.packages, step.stage),
            reboot_timeout_seconds=self._input.settings.reboot_timeout_seconds if reboot else None,
            show_before=first,
            show_after=last,
        )
        report = await self._stage_job(request)
        if not report.succeeded:
            for name in step.packages:
                self._ledger.failed(name, f"{step.stage.value}: {report.message}")
            await self._record()
            raise NodeFailedError(
                f"{step.stage.value} of {package.name} failed ({report.outcome}): {report.message}"
            )
        for name in step.packages:
            self._ledger.stage_done(name, step.stage)

    def _stage_request(
        self,
        step: NodeStep,
        package: Package,
        record: NodePackageState,
        *,
        reboot_timeout_seconds: int | None,
        show_before: StatusNote | None,
        show_after: StatusNote | None,
    ) -> StageRequest:
        return StageRequest(
            profile=self._input.profile,
            node=self._input.node,
            profile_uid=self._input.profile_uid,
            generation=self._input.generation,
            package=package,
            stage=step.stage,
            interrupt=step.interrupt,
            agent_image=self._input.settings.agent_image,
            host_root=self._input.settings.host_root,
            node_order=self._input.node_order,
            tolerations=self._input.tolerations,
            pod_labels=self._input.settings.stage_pod_labels,
            pod_annotations=self._input.settings.stage_pod_annotations,
            backoff_limit=self._input.settings.stage_backoff_limit,
            image_pull_timeout_seconds=self._input.settings.image_pull_timeout_seconds,
            attempt=self._input.attempt,
            # This run is one pass over the node: its retried activities adopt its own Jobs, a
            # later pass gets its own.
            pass_id=workflow.info().run_id,
            record=record,
            reboot_timeout_seconds=reboot_timeout_seconds,
            show_before=show_before,
            show_after=show_after,
        )

    async def _stage_job(self, request: StageRequest) -> StageReport:
        # The Job's own deadline bounds each attempt; allow its retries plus scheduling slack.
        bound = request.package.stage_timeout_seconds * 4 + 600
        if request.stage.is_interrupt:
            bound += self._input.settings.reboot_timeout_seconds
        return await self._wait(NAMES.RUN_STAGE, request, StageReport, bound)

    # ----- activity plumbing ----------------------------------------------------------------
    async def _call(self, name: str, arg: object, *, result_type: type[T]) -> T:
        try:
            result: T = await workflow.execute_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=retry.API_CALL_TIMEOUT,
                retry_policy=retry.API_CALL,
                summary=f"{name.rsplit('.', 1)[-1]} {self._input.node}: {self._stage}",
            )
        except ActivityError as error:
            raise _failure(name, error) from error
        return result

    async def _wait(self, name: str, arg: object, result_type: type[T] | None, bound_seconds: int) -> T:
        try:
            result: T = await workflow.execute_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=timedelta(seconds=bound_seconds + 120),
                heartbeat_timeout=retry.HEARTBEAT,
                retry_policy=retry.LONG_WAIT,
                summary=f"{name.rsplit('.', 1)[-1]} {self._input.node}: {self._stage}",
            )
        except ActivityError as error:
            raise _failure(name, error) from error
        return result

    async def _record(self) -> None:
        request = RecordStateRequest(
            profile=self._input.profile, node=self._input.node, state=self._ledger.state()
        )
        await self._call(NAMES.RECORD_STATE, request, result_type=type(None))

    async def _status(self, note: StatusNote) -> None:
        request = NodeStatusRequest(profile=self._input.profile, node=self._input.node, **note.model_dump())
        await self._call(NAMES.SET_NODE_STATUS, request, result_type=type(None))
        self._phase(note.phase)

    def _phase(self, phase: NodePhase) -> None:
        """The phase a status activity showed, for the Temporal UI's search."""
        if self._input.settings.search_attributes:
            workflow.upsert_search_attributes([sa.PHASE.value_set(phase.value)])

    async def _finish_failed(self, message: str, cordon: CordonReport | None) -> NodeResult:
        if self._abort:
            # An abort stops between stages and hands the node back to its workloads.
            if cordon is not None and cordon.ours:
                request = UncordonRequest(profile=self._input.profile, node=self._input.node)
                await self._call(NAMES.UNCORDON, request, result_type=bool)
            await self._status(
                StatusNote(phase=NodePhase.BLOCKED, reason=NodeReason.ABORTED, message=message)
            )
            return await self._report(RunStatus.FAILED, message)
        # A failed node stays cordoned (if we cordoned it) so nothing lands on a half-changed host.
        await self._status(StatusNote(phase=NodePhase.FAILED, reason=NodeReason.FAILED, message=message))
        return await self._report(RunStatus.FAILED, message)

    async def _report(self, status: RunStatus, message: str) -> NodeResult:
        result = NodeResult(node=self._input.node, target=self._input.target, status=status, message=message)
        parent = workflow.get_external_workflow_handle(self._input.parent_workflow_id)
        try:
            await parent.signal(NODE_FINISHED_SIGNAL, result)
        except ApplicationError:
            workflow.logger.warning(
                "parent %s gone; result kept in this workflow", self._input.parent_workflow_id
            )
        self._stage = "done"
        return result

    def _summary(self) -> str:
        stages = ", ".join(f"{s.stage.value}({'+'.join(s.packages)})" for s in self._input.work.steps)
        return f"{self._input.profile}: {stages}"


def _failure(name: str, error: ActivityError) -> Exception:
    """What an activity's failure means for this node: it is gone, or this step failed."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type == NODE_GONE:
        return NodeDeletedError(f"node deleted during {name.rsplit('.', 1)[-1]}: {_cause(error)}")
    return NodeFailedError(f"{name}: {_cause(error)}")


def _cause(error: ActivityError) -> str:
    """The innermost failure message (the activity's own words, not the wrapper's)."""
    cause: BaseException = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return str(cause)
