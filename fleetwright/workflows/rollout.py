"""The rollout workflow (``nodeprofile/<name>``): one long-lived workflow per NodeProfile.

Each turn it asks the observe-and-decide activity (which reads the fleet and runs the pure
planner) what to do, starts the node workflows the decision names, publishes its progress
(``progress``: search attributes, memo, current details), and sleeps until a node reports, a
human acts, the spec changes, the decision's wake-up time comes or the observe interval passes.
It continues as new when its history grows, carrying the planner state, the controls and unfolded
node results.

Node workflows are started by one activity per decision (``activities.starts``) and report back by
signal (sent by their last activity, ``activities.report``), so they keep running across this
workflow's continue-as-new.

Deletion is the same loop towards another target: the ``delete`` signal switches the spec to the
removal target (``convert.removal_packages``: every ``uninstall.enabled`` package uninstalled),
so the uninstall runs under the same policy (canary, batches, budget, halt on failure). Once no
targeted node needs work, the clean-up activity removes what the profile wrote on the nodes and
releases the NodeProfile's finalizer, and the workflow ends. A halted removal keeps the finalizer.

This module holds the workflow's handlers and its loop; each part of a turn is a module of its
own, all working on one ``RolloutRun`` (``rolloutrun``): ``turn`` (observe and decide),
``noderuns`` (start, abort and look up node workflows), ``sleeping`` (what wakes the next turn),
``retargeting`` (spec changes, fresh passes), ``deletion``, ``controls`` (the humans' signals
and updates) and ``visibility`` (progress, memo, search attributes).
"""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows import controls, pinning
from fleetwright.workflows.campaignreport import report_to_campaign
from fleetwright.workflows.deletion import clean_up, removal_done
from fleetwright.workflows.noderuns import abort_children, collect_ended, start_nodes
from fleetwright.workflows.retargeting import another_pass, apply_spec_change
from fleetwright.workflows.rolloutrun import RolloutRun
from fleetwright.workflows.sleeping import sleep
from fleetwright.workflows.turn import observe_and_decide
from fleetwright.workflows.visibility import publish

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.payloads import NODE_FINISHED_SIGNAL, NODES_CHANGED_SIGNAL
    from fleetwright.planner.rollout.lifecycle import begin
    from fleetwright.workflows.payloads import Deletion, NodeResult, Progress, RolloutInput, SpecChange

ROLLOUT_WORKFLOW = "fleetwright.rollout"
ABORTED = "Aborted"
DELETED = "Deleted"


@workflow.defn(name=ROLLOUT_WORKFLOW)
class RolloutWorkflow:
    @workflow.init
    def __init__(self, rollout: RolloutInput) -> None:
        self._run = RolloutRun(rollout)

    # ----- signals, updates, queries --------------------------------------------------------
    @workflow.signal(name=NODE_FINISHED_SIGNAL)
    def node_finished(self, result: NodeResult) -> None:
        self._run.results.append(result)

    @workflow.signal(name="pause")
    def pause(self) -> None:
        controls.set_flag(self._run, paused=True)

    @workflow.signal(name="resume")
    def resume(self) -> None:
        controls.set_flag(self._run, paused=False)

    @workflow.signal(name="abort")
    def abort(self) -> None:
        controls.set_flag(self._run, aborted=True)

    @workflow.signal(name="roll_back")
    def roll_back(self, reason: str) -> None:
        """Return what this rollout changed, for ``reason`` (a campaign's failure rule fired in
        another cluster), whatever its own failure rule says. A new spec lifts the demand."""
        controls.demand_rollback(self._run, reason)

    @workflow.signal(name="spec_changed")
    def spec_changed(self, change: SpecChange) -> None:
        controls.change_spec(self._run, change)

    @workflow.signal(name="delete")
    def delete(self, deletion: Deletion) -> None:
        """The NodeProfile is being deleted: uninstall what may be uninstalled, clean the nodes
        up, release the finalizer. Idempotent, never undone."""
        controls.delete(self._run, deletion)

    @workflow.signal(name=NODES_CHANGED_SIGNAL)
    def nodes_changed(self) -> None:
        self._run.decide_now = True

    @workflow.update(name="approve")
    def approve(self, step: str) -> str:
        return controls.approve(self._run, step)

    @approve.validator
    def _validate_approve(self, step: str) -> None:
        controls.check_approve(self._run, step)

    @workflow.update(name="retry_node")
    def retry_node(self, node: str) -> str:
        return controls.retry_node(self._run, node)

    @retry_node.validator
    def _validate_retry(self, node: str) -> None:
        controls.check_retry(self._run, node)

    @workflow.update(name="skip_node")
    def skip_node(self, node: str) -> str:
        return controls.skip_node(self._run, node)

    @skip_node.validator
    def _validate_skip(self, node: str) -> None:
        controls.check_skip(self._run, node)

    @workflow.update(name="release_node")
    def release_node(self, node: str) -> str:
        """A human puts a node this rollout failed on (one that failed its health gate, or was
        found hardware suspect) back into service: its cordon is lifted (``fleetwright release``)."""
        return controls.release_node(self._run, node)

    @release_node.validator
    def _validate_release(self, node: str) -> None:
        controls.check_release(self._run, node)

    @workflow.query(name="progress")
    def progress(self) -> Progress | None:
        return self._run.progress

    # ----- the loop -------------------------------------------------------------------------
    @workflow.run
    async def run(self, rollout: RolloutInput) -> Progress:
        run = self._run
        run.state = rollout.state or begin(run.spec(), workflow.now())
        run.ended_checked_at = workflow.now()
        while True:
            apply_spec_change(run)
            await collect_ended(run)
            if not await pinning.registries_allowed(run):
                await _continue_as_new_if_long(run)
                continue
            if pinning.used(run) and not await pinning.pin_images(run):
                # Held before its turn (a registry unreachable for hours): its history still grows.
                await _continue_as_new_if_long(run)
                continue
            report = await observe_and_decide(run)
            decision = report.decision
            run.held = report.held
            run.unregistered = report.unregistered_search_attributes
            run.state = decision.state
            await controls.release_nodes(run)
            if run.controls.aborted and not run.state.running and run.new_spec is None:
                # A spec change signalled while this turn was decided is applied first: a new
                # generation lifts the abort, even when the last running node finished meanwhile.
                progress = publish(run, decision, phase=ABORTED)
                await report_to_campaign(run)
                return progress
            if removal_done(run, decision) and await clean_up(run, decision):
                return publish(run, decision, phase=DELETED)
            if run.controls.aborted:
                await abort_children(run)
            else:
                await start_nodes(run, decision.start, report)
            publish(run, decision)
            await report_to_campaign(run)
            await _continue_as_new_if_long(run)
            if another_pass(run, decision):
                continue
            await sleep(run, decision)


async def _continue_as_new_if_long(run: RolloutRun) -> None:
    if run.should_continue_as_new():
        await workflow.wait_condition(workflow.all_handlers_finished)
        if run.should_continue_as_new():  # a handler may have queued a request meanwhile
            # The server does not carry an upserted memo into the next run: hand the
            # progress over, so readers (CLI, controller, bench) never see an empty one.
            workflow.continue_as_new(run.carry(), memo=run.memo())
