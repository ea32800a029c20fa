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
leaves it cordoned and Failed as ``HardwareSuspect``; when that was its gate again, the workflow
goes on re-gating it in quarantine (``quarantine``) until a run passes (uncordoned) or a release
or a new pass ends it.

The first status (InProgress) rides on the first activity and the last one (Complete, Failed or
Aborted) on the last, with the node's report to its rollout (``activities.report``): the workflow
completes in the task that learns its last activity finished. All the
node's stages run in one activity (``activities.stages``) that records the package state after
each stage, waits out a reboot inside its interrupt stage and shows the per-stage reports in its
result: a rebooting node that drains needs 4 activities, a node with plain stages 1 (under
someone else's cordon, one activity per stage, so the cordon is checked between stages). Each
activity costs the node workflow tasks and history events, the bulk of what fleetwright costs per
node. An abort cancels the stages' activity, which finishes the running stage and starts no other.

With the policy's ``preflight``, the work's checks run first as Jobs on the node in service: a node
whose checks all pass is recorded at the target and completes, spared (never cordoned, drained,
interrupted or gated); any other outcome takes the path above (``planner.node.preflight``).

The workflow class orchestrates; its parts each own one concern over one ``NodeRun`` (the run's
memory and activity plumbing): ``nodecordon`` the cordon and drain, ``nodestages`` the preflight
and the stages, ``nodestatus`` the statuses and the report; the gate's state and commands are
``nodegate``'s, the quarantine ``quarantine``'s; what a failure means is ``nodeerrors``'.
Orchestration only: every side effect is an activity, and the package state it records is the
``PackageLedger``'s. That record is what makes a restart resume after the last passed stage
instead of re-running it.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from fleetwright.workflows import nodestatus
from fleetwright.workflows.nodecordon import cordon_for_gate, prepare_disruption
from fleetwright.workflows.nodeerrors import GateFailedError, NodeDeletedError, NodeFailedError
from fleetwright.workflows.nodegate import GateRun
from fleetwright.workflows.noderun import NodeRun
from fleetwright.workflows.nodestages import preflight, run_steps
from fleetwright.workflows.nodestatus import completed, last, result, updating
from fleetwright.workflows.quarantine import Quarantine

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        END_QUARANTINE_SIGNAL,
        NODE_FINISHED_SIGNAL,
        NodePhase,
        StatusNote,
        UncordonRequest,
    )
    from fleetwright.api.keys import NodeReason
    from fleetwright.planner.health.analysis import CheckState
    from fleetwright.planner.node.preflight import SPARED, normal_path
    from fleetwright.planner.rollout.observations import RunStatus
    from fleetwright.workflows.payloads import NodeInput, NodeResult

NODE_WORKFLOW = "fleetwright.node"


@workflow.defn(name=NODE_WORKFLOW)
class NodeWorkflow:
    def __init__(self) -> None:
        self._run = NodeRun()

    @workflow.signal(name="abort")
    def abort(self) -> None:
        """Finish the current stage, start no other, uncordon what we cordoned unless the node's
        health was shown bad (the stages' activity is cancelled: it finishes its running stage)."""
        self._run.abort = True

    @workflow.signal(name=END_QUARANTINE_SIGNAL)
    def end_quarantine(self) -> None:
        """Stop re-gating a hardware-suspect node (a human released it, or a new pass starts)."""
        self._run.quarantine_ended = True

    @workflow.query(name="stage")
    def stage(self) -> str:
        return self._run.stage

    @workflow.update(name="approve_gate")
    def approve_gate(self) -> str:
        """A human passes the node's Inconclusive gate (``fleetwright approve P gate/<node>``)."""
        if self._run.gate is not None:
            self._run.gate.approved = True
        return f"approved the health gate of {self._run.node_input.node}"

    @approve_gate.validator
    def _validate_approve_gate(self) -> None:
        gate = self._run.gate
        if gate is None or not gate.held:
            raise ValueError(
                f"{self._run.node_input.node} is not waiting at an Inconclusive health gate "
                f"({self._run.stage})"
            )

    @workflow.query(name="gate")
    def gate(self) -> list[CheckState]:
        """The node gate's checks as they stand."""
        return list(self._run.gate.states.values()) if self._run.gate is not None else []

    @workflow.run
    async def run(self, node_input: NodeInput) -> NodeResult:
        run = self._run
        run.begin(node_input)
        if run.gated():
            # Only inputs of a policy with a node gate have one: no 0.1.0 history does.
            run.gate = GateRun(node_input, aborted=lambda: run.abort, show=run.status, at=run.at)
        # patch gate-quarantine: since 0.2; deprecate_patch in 0.3, remove in 0.4
        self._quarantined = node_input.regate and workflow.patched("gate-quarantine")
        try:
            return await self._update()
        except NodeDeletedError as gone:
            # Wherever it was noticed (even while finishing a failure), a deleted node ends the
            # workflow cleanly: the rollout counts it as having left the fleet, not as failed.
            run.phase("Gone")
            return await self._report(RunStatus.GONE, str(gone))

    async def _update(self) -> NodeResult:
        run = self._run
        # The first activity (cordon, else the first stage) shows InProgress; with neither, a
        # status activity of its own.
        shown = updating(run)
        first: StatusNote | None = shown
        if not (run.needs_drain() or run.node_input.work.steps):
            await run.status(shown)
            first = None
        try:
            # patch preflight: since 0.3; deprecate_patch in 0.4, remove in 0.5
            # Only inputs of a policy with ``preflight`` ask for it: no 0.1.0 or 0.2.0 history does.
            if run.node_input.preflight and workflow.patched("preflight"):
                failure = await preflight(run)
                if failure is None:
                    return await self._spared()
                first = updating(run, normal_path(failure))
            if run.needs_drain():
                await prepare_disruption(run, first)
                first = None
            await run_steps(run, first)
            if run.gate is not None:
                await cordon_for_gate(run)
                await run.gate.run()
        except NodeFailedError as failure:
            return await self._finish_failed(str(failure), held=isinstance(failure, GateFailedError))
        await self._finish(ours=run.ours())
        return result(run, RunStatus.SUCCEEDED, "complete")

    async def _spared(self) -> NodeResult:
        """The preflight passed: never cordoned, no stage, no node gate (nothing changed here)."""
        run = self._run
        workflow.set_current_details(f"**Spared by preflight**: {SPARED}")
        if run.node_input.runtime_required:
            run.stage = "release-runtime-taint"
            await run.call(NodeActivities.release_runtime_taint, run.target)
            await run.status(nodestatus.spared_note(run))
        else:
            run.phase(NodePhase.COMPLETE.value)
        return result(run, RunStatus.SUCCEEDED, SPARED, spared=True)

    async def _finish(self, *, ours: bool) -> None:
        run = self._run
        shown_by_last = nodestatus.last_activity_shows_complete(run)
        if ours:
            show = completed(run) if shown_by_last else None
            await run.call(
                NodeActivities.uncordon,
                UncordonRequest(profile=run.node_input.profile, node=run.node_input.node, show_after=show),
            )
        if run.node_input.runtime_required:
            # Workloads may land once every runtime-required profile is complete here.
            run.stage = "release-runtime-taint"
            await run.call(NodeActivities.release_runtime_taint, run.target)
        if shown_by_last and (ours or (run.node_input.work.steps and not run.gated())):
            run.phase(NodePhase.COMPLETE.value)
        else:
            await run.status(completed(run))

    async def _finish_failed(self, message: str, *, held: bool = False) -> NodeResult:
        run = self._run
        if self._quarantined:
            # Its health was shown bad before: whatever ended this run (the gate again, a stage,
            # an abort), it stays cordoned and Failed until a gate passes or a human releases it.
            message = f"hardware suspect: {message}; {self._quarantine_hint()}"
            await run.status(last(run, NodePhase.FAILED, NodeReason.HARDWARE_SUSPECT, message))
            # patch quarantine-regate: since 0.3; deprecate_patch in 0.4, remove in 0.5
            if held and not run.abort and workflow.patched("quarantine-regate"):
                return await self._quarantine(message)
            return result(run, RunStatus.FAILED, message)
        if held:
            # A failed or aborted health gate: the node stays cordoned and Failed, naming the check.
            await run.status(last(run, NodePhase.FAILED, NodeReason.GATE_FAILED, message))
            return result(run, RunStatus.FAILED, message)
        if run.abort:
            # An abort stops between stages and hands the node back to its workloads.
            if run.ours():
                request = UncordonRequest(profile=run.node_input.profile, node=run.node_input.node)
                await run.call(NodeActivities.uncordon, request)
            await run.status(last(run, NodePhase.BLOCKED, NodeReason.ABORTED, message))
            return result(run, RunStatus.FAILED, message)
        # A failed node stays cordoned (if we cordoned it) so nothing lands on a half-changed host.
        await run.status(last(run, NodePhase.FAILED, NodeReason.FAILED, message))
        return result(run, RunStatus.FAILED, message)

    def _quarantine_hint(self) -> str:
        """What the message of a quarantined node's failure adds: why, and what ends it."""
        node_input = self._run.node_input
        return (
            "its health gate failed on the change the rollback returned it from; kept cordoned, "
            "its gate run again by itself, until a run passes or "
            f"`fleetwright release {node_input.profile} {node_input.node}`"
        )

    async def _quarantine(self, failure: str) -> NodeResult:
        """Re-gate the hardware-suspect node (its rollout already has its failure) until a run
        passes, then lift our cordon (Complete, its gauge drops); or until the quarantine ends."""
        run = self._run
        quarantine = Quarantine(
            run.node_input,
            ended=lambda: run.quarantine_ended or run.abort,
            show=run.status,
            at=run.at,
        )
        passed = await quarantine.regate(failure)
        if passed is None:
            return result(run, RunStatus.FAILED, failure)
        shown = StatusNote(phase=NodePhase.COMPLETE, reason=NodeReason.GATE_PASSED, message=passed)
        if run.ours():
            request = UncordonRequest(
                profile=run.node_input.profile, node=run.node_input.node, show_after=shown
            )
            await run.call(NodeActivities.uncordon, request)
        else:  # someone else's cordon stays theirs to lift
            await run.status(shown)
        if run.node_input.runtime_required:
            run.stage = "release-runtime-taint"
            await run.call(NodeActivities.release_runtime_taint, run.target)
        return result(run, RunStatus.SUCCEEDED, passed)

    async def _report(self, status: RunStatus, message: str) -> NodeResult:
        """Signal the result to the rollout from here: only a deleted node's, which no activity
        shows."""
        ended = result(self._run, status, message)
        parent_id = self._run.node_input.parent_workflow_id
        parent = workflow.get_external_workflow_handle(parent_id)
        try:
            await parent.signal(NODE_FINISHED_SIGNAL, ended)
        except ApplicationError:
            workflow.logger.warning("parent %s gone; result kept in this workflow", parent_id)
        return ended
