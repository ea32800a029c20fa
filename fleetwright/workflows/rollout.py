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
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        NODE_FINISHED_SIGNAL,
        NODES_CHANGED_SIGNAL,
        CleanupRequest,
        EndedNodesRequest,
        StartNodesRequest,
        WorkflowStart,
    )
    from fleetwright.activities.rollout import RolloutActivities
    from fleetwright.activities.starts import NodeStarter
    from fleetwright.api.deploymentpolicy import DeploymentPolicy
    from fleetwright.api.nodeprofile import NodeProfile, Package
    from fleetwright.planner import convert
    from fleetwright.planner.rollout import begin, retarget
    from fleetwright.planner.rolloutstate import BlockedNode, Decision, NodeStart, Phase, RolloutState
    from fleetwright.planner.spec import RolloutSpec
    from fleetwright.workflows import retry
    from fleetwright.workflows import search as sa
    from fleetwright.workflows.ids import node_workflow_id
    from fleetwright.workflows.node import NODE_WORKFLOW
    from fleetwright.workflows.payloads import (
        Controls,
        DecideReport,
        DecideRequest,
        Deletion,
        NodeInput,
        NodeResult,
        Progress,
        RolloutInput,
        SpecChange,
    )
    from fleetwright.workflows.progress import (
        current_details,
        node_details,
        node_search_attributes,
        node_summary,
        rollout_progress,
        search_attributes,
    )

ROLLOUT_WORKFLOW = "fleetwright.rollout"
ABORTED = "Aborted"
DELETED = "Deleted"
# A decision starts at most 200 nodes (planner.rollout.MAX_STARTS_PER_DECISION), a few a second on
# a loaded dev server: the bound is for a worker lost mid-start, whose retry skips what it began.
START_NODES_TIMEOUT = timedelta(minutes=10)


@workflow.defn(name=ROLLOUT_WORKFLOW)
class RolloutWorkflow:
    @workflow.init
    def __init__(self, rollout: RolloutInput) -> None:
        # From the input before any handler runs: a run continued as new gets the signals sent
        # during the hand-over (node reports, a pause) in its first activation, ahead of ``run``.
        self._results: list[NodeResult] = list(rollout.results)
        self._controls = rollout.controls
        # A policy of None keeps the current one (a deletion that outlived its policy).
        self._new_spec: tuple[NodeProfile, DeploymentPolicy | None] | None = None
        # A signal or update asks for a decision now: the next turn waits for no timer or pacing.
        self._decide_now = False
        # When the last observe-and-decide activity was asked for and when it answered.
        self._last_turn: tuple[datetime, datetime] | None = None
        self._state: RolloutState | None = None
        self._progress: Progress | None = None
        self._retry: list[str] = []
        self._abort_sent: set[str] = set()
        self._fresh_pass = False
        self._held: tuple[BlockedNode, ...] = ()
        self._unregistered: tuple[str, ...] = ()
        # When the running nodes' workflows were last looked up, and the failures made up for
        # those found ended without finishing (their nodes are shown failed on the next turn).
        self._ended_checked_at: datetime | None = None
        self._ended: list[NodeResult] = []

    # ----- signals, updates, queries --------------------------------------------------------
    @workflow.signal(name=NODE_FINISHED_SIGNAL)
    def node_finished(self, result: NodeResult) -> None:
        self._results.append(result)

    @workflow.signal(name="pause")
    def pause(self) -> None:
        self._controls = self._controls.model_copy(update={"paused": True})
        self._decide_now = True

    @workflow.signal(name="resume")
    def resume(self) -> None:
        self._controls = self._controls.model_copy(update={"paused": False})
        self._decide_now = True

    @workflow.signal(name="abort")
    def abort(self) -> None:
        self._controls = self._controls.model_copy(update={"aborted": True})
        self._decide_now = True

    @workflow.signal(name="spec_changed")
    def spec_changed(self, change: SpecChange) -> None:
        self._new_spec = (change.profile, change.policy)
        self._decide_now = True

    @workflow.signal(name="delete")
    def delete(self, deletion: Deletion) -> None:
        """The NodeProfile is being deleted: uninstall what may be uninstalled, clean the nodes
        up, release the finalizer. Idempotent, never undone."""
        pending = self._new_spec[1] if self._new_spec else None
        self._new_spec = (deletion.profile, deletion.policy or pending)
        self._controls = self._controls.model_copy(update={"deleting": True, "aborted": False})
        self._decide_now = True

    @workflow.signal(name=NODES_CHANGED_SIGNAL)
    def nodes_changed(self) -> None:
        self._decide_now = True

    @workflow.update(name="approve")
    def approve(self, step: str) -> str:
        self._controls = self._controls.model_copy(
            update={"approvals": tuple(sorted({*self._controls.approvals, step}))}
        )
        self._decide_now = True
        return f"approved {step}"

    @approve.validator
    def _validate_approve(self, step: str) -> None:
        known = self._approval_ids()
        if step not in known:
            raise ValueError(f"unknown approval step {step!r}; this policy has: {', '.join(known) or 'none'}")
        if step in self._controls.approvals:
            raise ValueError(f"{step} is already approved")

    @workflow.update(name="retry_node")
    def retry_node(self, node: str) -> str:
        self._retry.append(node)
        attempts = dict(self._controls.attempts)
        attempts[node] = attempts.get(node, 0) + 1
        self._controls = self._controls.model_copy(update={"attempts": attempts})
        self._decide_now = True
        return f"retrying {node}"

    @retry_node.validator
    def _validate_retry(self, node: str) -> None:
        failed = {f.node for f in self._state.failed} if self._state else set()
        if node not in failed:
            raise ValueError(
                f"{node} has not failed in this rollout (failed: {', '.join(sorted(failed)) or 'none'})"
            )

    @workflow.update(name="skip_node")
    def skip_node(self, node: str) -> str:
        self._controls = self._controls.model_copy(
            update={"skipped": tuple(sorted({*self._controls.skipped, node}))}
        )
        self._retry.append(node)  # a skipped failed node no longer holds the rollout
        self._decide_now = True
        return f"skipping {node}"

    @skip_node.validator
    def _validate_skip(self, node: str) -> None:
        if node in self._controls.skipped:
            raise ValueError(f"{node} is already skipped")
        running = {r.node for r in self._state.running} if self._state else set()
        if node in running:
            raise ValueError(f"{node} is being updated right now; abort or wait for it to finish")

    @workflow.query(name="progress")
    def progress(self) -> Progress | None:
        return self._progress

    def _approval_ids(self) -> list[str]:
        if self._state is None:
            return []
        return self._state.spec.policy.approval_ids(s.name for s in self._state.compartments)

    # ----- the loop -------------------------------------------------------------------------
    @workflow.run
    async def run(self, rollout: RolloutInput) -> Progress:
        self._profile, self._policy, self._settings = rollout.profile, rollout.policy, rollout.settings
        self._previous = rollout.previous
        self._state = rollout.state or begin(self._spec(), workflow.now())
        self._ended_checked_at = workflow.now()
        while True:
            self._apply_spec_change()
            await self._collect_ended()
            report = await self._observe_and_decide()
            decision = report.decision
            self._held = report.held
            self._unregistered = report.unregistered_search_attributes
            self._state = decision.state
            if self._controls.aborted and not self._state.running and self._new_spec is None:
                # A spec change signalled while this turn was decided is applied first: a new
                # generation lifts the abort, even when the last running node finished meanwhile.
                return self._publish(decision, phase=ABORTED)
            if self._removal_done(decision) and await self._clean_up(decision):
                return self._publish(decision, phase=DELETED)
            if self._controls.aborted:
                await self._abort_children()
            else:
                await self._start_nodes(decision.start, report)
            self._publish(decision)
            if self._should_continue_as_new():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self._should_continue_as_new():  # a handler may have queued a request meanwhile
                    # The server does not carry an upserted memo into the next run: hand the
                    # progress over, so readers (CLI, controller, bench) never see an empty one.
                    workflow.continue_as_new(self._carry(), memo=self._memo())
            if self._another_pass(decision):
                continue
            await self._sleep(decision)

    def _another_pass(self, decision: Decision) -> bool:
        """A finished rollout whose fleet gained nodes needing work (a node joined, or drifted)
        begins a fresh pass over the same target: the policy's steps run again for those nodes,
        canary first. Once per wake-up, so nodes that cannot be worked on do not spin the loop."""
        assert self._state is not None
        if decision.phase is not Phase.COMPLETE or decision.counts.needs_work == 0 or self._fresh_pass:
            self._fresh_pass = False
            return False
        self._fresh_pass = True
        self._state = begin(self._state.spec, workflow.now(), previous=self._state)
        return True

    def _spec(self) -> RolloutSpec:
        return convert.rollout_spec(
            self._profile, self._policy, removing=self._controls.deleting, previous=self._previous
        )

    def _removal_done(self, decision: Decision) -> bool:
        """Deleting, and this decision (not one taken before the delete signal arrived) says the
        removal target holds on every targeted node with no node workflow still running."""
        return (
            self._controls.deleting
            and self._new_spec is None
            and decision.state.spec.target == self._spec().target
            and _removed(decision)
        )

    async def _clean_up(self, decision: Decision) -> bool:
        """The removal is complete: clean the nodes and release the finalizer. A failure (the API
        refuses, RBAC) is shown and tried again after the observe interval; never a failed run."""
        meta = self._profile.metadata
        request = CleanupRequest(profile=meta.name, profile_uid=meta.uid or "")
        try:
            report = await workflow.execute_activity_method(
                NodeActivities.clean_up,
                request,
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=retry.API_CALL,
                summary=f"remove {meta.name} from its nodes and release the finalizer",
            )
        except ActivityError as error:
            self._publish(
                decision.model_copy(update={"message": f"clean-up of the nodes failed: {error.cause}"})
            )
            await workflow.sleep(timedelta(seconds=self._settings.observe_interval_seconds))
            return False
        workflow.logger.info("profile %s removed from %d node(s)", meta.name, len(report.nodes))
        return True

    def _apply_spec_change(self) -> None:
        if self._new_spec is None or self._state is None:
            return
        replaced, target = self._profile, self._spec().target
        profile, policy = self._new_spec
        if (profile.metadata.generation or 0) != (self._profile.metadata.generation or 0):
            # An abort stops the profile's rollout until its spec changes (or a human resumes):
            # a new generation is a rollout of its own, an edit of the policy alone is not.
            self._controls = self._controls.model_copy(update={"aborted": False})
            self._abort_sent = set()  # a later abort reaches the nodes this rollout starts anew
        self._profile = profile
        self._policy = policy or self._policy
        self._new_spec = None
        if self._spec().target != target and self._state.spec.rollback is None:
            # New packages: the profile they replace is what a rollback of their rollout returns
            # to. After a rollback the nodes carry the profile before the rolled-back one again,
            # so that one stays what a later rollback returns to.
            self._previous = replaced
        spec = self._spec()
        if spec.target != self._state.spec.target:
            self._controls = self._controls.model_copy(update={"approvals": (), "skipped": ()})
        self._state = retarget(self._state, spec, workflow.now())

    async def _collect_ended(self) -> bool:
        """Node workflows that ended without reporting (terminated or timed out in Temporal, or
        whose report was lost) are looked up once per ``ended_check_seconds`` while nodes run (its
        own, and those still running for an earlier target), and their results folded in as
        reports: the rollout never waits for them forever, and a node whose workflow did not finish
        is shown failed, which drops its start claim. True when it found one."""
        assert self._state is not None
        assert self._ended_checked_at is not None
        now = workflow.now()
        if now - self._ended_checked_at < self._ended_check():
            return False
        self._ended_checked_at = now
        reported = {r.node for r in self._results}
        profile = self._state.spec.profile
        waiting = {run.node: run.started_at for run in self._state.running if run.node not in reported}
        earlier = tuple(n for n in self._state.running_for_earlier_target if n not in reported)
        if not waiting and not earlier:
            return False
        request = EndedNodesRequest(
            id_prefix=node_workflow_id(profile, ""),
            waiting=waiting,
            target=self._state.spec.target,
            earlier=earlier,
        )
        ended = await workflow.execute_activity_method(
            NodeStarter.ended_nodes,
            request,
            start_to_close_timeout=START_NODES_TIMEOUT,
            heartbeat_timeout=retry.HEARTBEAT,
            retry_policy=retry.API_CALL,
            summary=f"look for ended node workflows among the {len(waiting)} running of {profile}",
        )
        reported = {r.node for r in self._results}  # reports that arrived meanwhile win
        self._results.extend(r for r in ended.finished + ended.unfinished if r.node not in reported)
        self._ended.extend(r for r in ended.unfinished if r.node not in reported)
        return bool(ended.finished or ended.unfinished)

    def _ended_check(self) -> timedelta:
        return timedelta(seconds=self._settings.ended_check_seconds)

    async def _observe_and_decide(self) -> DecideReport:
        assert self._state is not None
        retried = self._take_retried()
        ended, self._ended = tuple(self._ended), []
        reported: list[NodeResult] = []
        unclaim: tuple[str, ...] = ()
        while True:
            reported, self._results = reported + self._results, []
            controls = self._controls
            request = DecideRequest(
                now=workflow.now(),
                profile=self._profile,
                state=self._state,
                results=tuple(reported),
                controls=controls,
                reset_failed=retried,
                release_claims=unclaim,
                ended=ended,
            )
            report = await self._decide(request)
            # A pause or abort that arrived while the activity ran: the decision was taken without
            # it, so its starts must not happen (a node started after a handled pause). Decide again
            # from the same state under the new controls, dropping the claims this decision wrote.
            if not (report.decision.start and _stopped_since(controls, self._controls)):
                return report
            unclaim = tuple(s.node for s in report.decision.start)

    def _take_retried(self) -> tuple[str, ...]:
        """The nodes a human retried or skipped since the last turn: their failures leave the state
        (and a halt they caused with them)."""
        assert self._state is not None
        retried, self._retry = tuple(self._retry), []
        if retried:
            failed = tuple(f for f in self._state.failed if f.node not in retried)
            self._state = self._state.model_copy(update={"failed": failed, "halt": None})
        return retried

    async def _decide(self, request: DecideRequest) -> DecideReport:
        # Cleared as the turn asks, not as it goes to sleep: a signal that arrives while the
        # activity runs (a node change, a human) was not seen by it and wakes the next turn at once.
        self._decide_now = False
        asked = workflow.now()
        report = await workflow.execute_activity_method(
            RolloutActivities.observe_and_decide,
            request,
            # One list and a pure decision (about a second at 10,000 nodes): the bound is how long a
            # worker lost mid-call stalls the rollout before another attempt.
            start_to_close_timeout=retry.API_CALL_TIMEOUT,
            retry_policy=retry.API_CALL,
            summary=f"observe the nodes of {self._profile.metadata.name} and decide the next turn",
        )
        self._last_turn = (asked, workflow.now())
        return report

    async def _start_nodes(self, starts: tuple[NodeStart, ...], report: DecideReport) -> None:
        if not starts:
            return
        assert self._state is not None
        spec = self._state.spec
        # One activity starts the decision's node workflows: no history events or workflow tasks per
        # node here.
        request = StartNodesRequest(
            workflow=NODE_WORKFLOW,
            task_queue=workflow.info().task_queue,
            decided_at=workflow.now(),
            starts=tuple(self._node_start(self._node_input(start, report)) for start in starts),
        )
        await workflow.execute_activity_method(
            NodeStarter.start_nodes,
            request,
            start_to_close_timeout=START_NODES_TIMEOUT,
            heartbeat_timeout=retry.HEARTBEAT,
            retry_policy=retry.API_CALL,
            summary=f"start {len(starts)} node workflow(s) of {spec.profile}",
        )

    def _node_start(self, node: NodeInput) -> WorkflowStart:
        return WorkflowStart(
            id=node_workflow_id(node.profile, node.node),
            input=node.model_dump(mode="json"),
            summary=node_summary(node),
            details=node_details(node, self._policy.metadata.name),
            search_attributes=node_search_attributes(node),
        )

    def _node_input(self, start: NodeStart, report: DecideReport) -> NodeInput:
        assert self._state is not None
        spec = self._state.spec
        meta = self._profile.metadata
        return NodeInput(
            profile=spec.profile,
            profile_uid=meta.uid or "",
            generation=meta.generation or 0,
            target=spec.target,
            since=self._state.rollout_since,
            node=start.node,
            parent_workflow_id=workflow.info().workflow_id,
            work=start.work,
            records=report.records.get(start.node, {}),
            # A rollback's node returns each package to its own earlier definition.
            desired=start.work.returns_to if start.work.returns_to is not None else spec.packages,
            packages=self._stage_packages(start),
            drain=self._profile.spec.drain,
            protected_pods=self._profile.spec.pod_non_interrupt_labels,
            tolerations=tuple(self._profile.spec.additional_tolerations),
            node_order=report.node_order.get(start.node, 0),
            attempt=self._controls.attempts.get(start.node, 0),
            runtime_required=self._profile.spec.runtime_required,
            settings=self._settings,
            unregistered_search_attributes=self._unregistered,
        )

    def _stage_packages(self, start: NodeStart) -> tuple[Package, ...]:
        """The package definitions the node's stage Jobs run: the profile's, or for a rollback
        each package's definition in what it returns to (the replaced profile's; an uninstall
        removes what the rolled-back profile installed)."""
        current = tuple(self._profile.spec.packages)
        returns = start.work.returns_to
        if returns is None:
            return current
        replaced = {p.name: p for p in self._previous.spec.packages} if self._previous else {}
        mine = {p.name: p for p in current}
        return tuple(mine[p.name] if p.uninstall else replaced[p.name] for p in returns)

    async def _abort_children(self) -> None:
        assert self._state is not None
        for run in self._state.running:
            if run.node in self._abort_sent:
                continue
            self._abort_sent.add(run.node)
            handle = workflow.get_external_workflow_handle(
                node_workflow_id(self._state.spec.profile, run.node)
            )
            try:
                await handle.signal("abort")
            except ApplicationError:
                # It finished in the meantime; its report is on the way.
                workflow.logger.info("node %s finished before the abort reached it", run.node)

    async def _sleep(self, decision: Decision) -> None:
        """Wait for a node report, a human, a spec or node change (the controller signals those),
        or the decision's own wake-up time. Only while the planner says something outside the
        rollout can change its decision (``Decision.watch_fleet``: blocked nodes, budget held by
        others, a soak health gate, nodes running for an earlier target) does it also re-observe on
        the interval. While its own nodes run it looks for ended node workflows every
        ``ended_check_seconds`` without a turn of its own, unless it finds one; a gate, a halt or a
        finished rollout waits on one timer or none, so a canary gate can hold for days on a single
        timer."""
        # A spec change or deletion signalled while this turn's activity ran must not wait for the
        # next timer (a finished rollout has none).
        if self._new_spec is not None:
            return
        while True:
            checking = bool(decision.state.running or decision.state.running_for_earlier_target)
            timeout, turn = self._sleep_bound(decision, checking)
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(self._woken, timeout=timeout)
                break
            if turn or await self._collect_ended():
                break
        await self._pace()

    def _woken(self) -> bool:
        return bool(self._results) or self._decide_now

    def _sleep_bound(self, decision: Decision, checking: bool) -> tuple[timedelta | None, bool]:
        """How long to sleep at most, and whether waking then is a turn (else it is the look for
        ended node workflows only)."""
        bounds: list[tuple[timedelta, bool]] = []
        now = workflow.now()
        if decision.wake_at is not None:
            bounds.append((max(decision.wake_at - now, timedelta(seconds=1)), True))
        if decision.watch_fleet:
            bounds.append((timedelta(seconds=self._settings.observe_interval_seconds), True))
        if checking:
            assert self._ended_checked_at is not None
            due = self._ended_checked_at + self._ended_check() - now
            bounds.append((max(due, timedelta(seconds=1)), False))
        if not bounds:
            return None, True
        return min(bounds, key=lambda bound: (bound[0], not bound[1]))

    async def _pace(self) -> None:
        """A turn woken by node reports starts no sooner than the last turn's own duration after it
        ended. Each turn reads every Node: at 10,000 nodes that is seconds of apiserver and worker
        CPU, and with reports arriving all the time back-to-back turns would spend a core on
        observing alone; spaced, observing takes at most half the time, and a slow turn (a loaded
        apiserver) spaces the next one further. A human's signal or a spec change does not wait."""
        if self._decide_now or self._last_turn is None:
            return
        asked, answered = self._last_turn
        resume = answered + (answered - asked)
        if resume <= workflow.now():
            return
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._decide_now, timeout=resume - workflow.now())

    def _should_continue_as_new(self) -> bool:
        # Requests not yet reported in (a spec change, a retry) are handled first: only the state,
        # the controls and node results travel to the next run.
        if self._new_spec is not None or self._retry:
            return False
        info = workflow.info()
        return (
            info.get_current_history_length() >= self._settings.history_events_before_continue
            or info.get_current_history_size() >= self._settings.history_bytes_before_continue
        )

    def _memo(self) -> dict[str, Any]:
        return {"progress": self._progress.model_dump(mode="json")} if self._progress is not None else {}

    def _carry(self) -> RolloutInput:
        assert self._state is not None
        return RolloutInput(
            profile=self._profile,
            policy=self._policy,
            previous=self._previous,
            settings=self._settings,
            state=self._state,
            controls=self._controls,
            results=tuple(self._results),
        )

    # ----- visibility ----------------------------------------------------------------------
    def _publish(self, decision: Decision, phase: str | None = None) -> Progress:
        generation = self._profile.metadata.generation or 0
        unregistered = self._unregistered if self._settings.search_attributes else ()
        progress = rollout_progress(
            decision,
            controls=self._controls,
            held=self._held,
            generation=generation,
            phase=phase,
            unregistered_search_attributes=unregistered,
        )
        self._progress = progress
        if self._settings.search_attributes:
            sa.upsert(search_attributes(progress, decision.state.spec.packages), self._unregistered)
        workflow.upsert_memo(self._memo())
        workflow.set_current_details(current_details(progress, decision))
        return progress


def _stopped_since(before: Controls, now: Controls) -> bool:
    """A pause or an abort was received after ``before`` was sent to the planner."""
    return (now.paused and not before.paused) or (now.aborted and not before.aborted)


def _removed(decision: Decision) -> bool:
    """The removal target holds on every targeted node and no node workflow is still running."""
    return decision.phase is Phase.COMPLETE and decision.counts.needs_work == 0 and not decision.state.running
