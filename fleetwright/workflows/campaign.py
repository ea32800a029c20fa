"""The campaign workflow (``campaign/<name>``): one change rolled across member clusters.

Each member cluster's rollout is a child ``RolloutWorkflow`` (the same engine, activities and node
workflows as a NodeProfile's), started on the member's task queue, where the worker serves it
with a Kubernetes client for that cluster (``worker.members``). The rollouts report their progress
by signal (``cluster_progress``, sent by ``campaignreport``); each report wakes the campaign,
which asks the pure core (``planner.campaign``) what to do: start the next clusters of the stage,
hold at a stage's gate (measuring its fleet gate's checks in each cluster, one activity each on the
member's queue), or hold every cluster when the failure rule fired or a human paused
(the rollouts get ``pause``, and ``resume`` when the hold lifts). Like a rollout, the campaign
stays once complete (a node joining a member later still gets the change) and continues as new
when its history grows.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.health import HealthActivities
    from fleetwright.activities.payloads import ChangedNodesMeasureRequest
    from fleetwright.api.common import ObjectMeta
    from fleetwright.api.nodeprofile import NodeProfile
    from fleetwright.planner import campaign as core
    from fleetwright.planner.campaign import CampaignDecision, CampaignPhase, ClusterReport
    from fleetwright.planner.campaigngate import GateRequest
    from fleetwright.planner.health import analysis
    from fleetwright.planner.health.analysis import Measurement
    from fleetwright.workflows import retry
    from fleetwright.workflows.ids import member_profile, member_task_queue, rollout_workflow_id
    from fleetwright.workflows.payloads import (
        CampaignChange,
        CampaignInput,
        CampaignProgress,
        ClusterProgress,
        Controls,
        RolloutInput,
        SpecChange,
    )

from fleetwright.workflows.campaignreport import CLUSTER_PROGRESS_SIGNAL
from fleetwright.workflows.rollout import RolloutWorkflow

CAMPAIGN_WORKFLOW = "fleetwright.campaign"
PENDING = "Pending"
ABORTED = "Aborted"


@workflow.defn(name=CAMPAIGN_WORKFLOW)
class CampaignWorkflow:
    @workflow.init
    def __init__(self, campaign: CampaignInput) -> None:
        self._input = campaign
        self._state = core.retarget(campaign.state, campaign.campaign.metadata.generation or 0)
        self._children = list(campaign.children)
        self._reports = dict(campaign.reports)
        self._paused = campaign.paused
        self._aborted = campaign.aborted
        self._sent = ""  # the last of pause and resume sent to every rollout
        self._aborting = False
        self._rolling_back = False
        self._changed = True
        self._progress: CampaignProgress | None = None

    @property
    def _name(self) -> str:
        return self._input.campaign.metadata.name or ""

    # ----- signals, updates, queries --------------------------------------------------------
    @workflow.signal(name=CLUSTER_PROGRESS_SIGNAL)
    def cluster_progress(self, progress: ClusterProgress) -> None:
        for cluster in self._input.campaign.spec.clusters:
            if rollout_workflow_id(member_profile(self._name, cluster.name)) == progress.workflow_id:
                self._reports[cluster.name] = progress.report
                self._changed = True

    @workflow.signal(name="spec_changed")
    def spec_changed(self, change: CampaignChange) -> None:
        """A new generation: the stages start over (each cluster's rollout retargeted in its turn)."""
        generation = change.campaign.metadata.generation or 0
        if generation > self._state.generation:
            self._input = self._input.model_copy(
                update={"campaign": change.campaign, "policies": change.policies}
            )
            self._state = core.retarget(self._state, generation)
            self._rolling_back = False  # a rollback was for the generation it returned
            self._changed = True

    @workflow.signal(name="pause")
    def pause(self) -> None:
        self._paused, self._changed = True, True

    @workflow.signal(name="resume")
    def resume(self) -> None:
        self._paused, self._changed = False, True
        self._state = core.resume(self._state)

    @workflow.signal(name="abort")
    def abort(self) -> None:
        self._aborted, self._changed = True, True

    @workflow.update(name="approve")
    def approve(self, stage: str) -> str:
        self._state = core.approve(self._input.campaign.spec, self._state, stage)
        self._changed = True
        return f"approved the stage after {stage}"

    @approve.validator
    def _validate_approve(self, stage: str) -> None:
        try:
            core.approve(self._input.campaign.spec, self._state, stage)
        except ValueError as error:
            raise ApplicationError(str(error), non_retryable=True) from None

    @workflow.query(name="progress")
    def progress(self) -> CampaignProgress | None:
        return self._progress

    # ----- the loop -------------------------------------------------------------------------
    @workflow.run
    async def run(self, campaign: CampaignInput) -> CampaignProgress:
        while True:
            self._changed = False
            decision = core.decide(
                self._input.campaign.spec,  # a new generation's, once signalled
                self._state,
                self._reports,
                paused=self._paused or self._aborted,
                now=workflow.now(),
            )
            self._state = decision.state
            for cluster in decision.start:
                await self._start(cluster)
            await self._steer(decision)
            self._publish(decision)
            if self._aborted and self._rollouts_stopped():
                return self._publish(decision, phase=ABORTED)
            if decision.measure and not self._aborted:
                await self._measure(decision.measure)
                continue  # decide again with what was measured
            await self._continue_as_new_if_long()
            await self._sleep(decision)

    async def _start(self, cluster: str) -> None:
        """Start the member's rollout on its task queue, or retarget the one that runs."""
        spec = self._input.campaign.spec
        stage = next(s for s in spec.stages if cluster in s.clusters)
        secret = next(c.kubeconfig_secret for c in spec.clusters if c.name == cluster)
        reference = stage.policy or spec.policy
        name = member_profile(self._name, cluster)
        # The Campaign's uid stands for the profile's: a stage Job's identity (and its copy
        # directory on the node) per campaign and generation, as per profile and generation.
        meta = self._input.campaign.metadata
        profile = NodeProfile(
            metadata=ObjectMeta(name=name, generation=meta.generation, uid=meta.uid), spec=spec.profile
        )
        policy = self._input.policies[reference.name if reference else ""]
        if cluster in self._children:
            handle = workflow.get_external_workflow_handle(rollout_workflow_id(name))
            await handle.signal("spec_changed", SpecChange(profile=profile, policy=policy))
        else:
            await workflow.start_child_workflow(
                RolloutWorkflow.run,
                RolloutInput(
                    profile=profile,
                    policy=policy,
                    settings=self._input.settings,
                    controls=Controls(paused=self._paused),
                ),
                id=rollout_workflow_id(name),
                task_queue=member_task_queue(workflow.info().task_queue, secret),
                # A rollout outlives each run of the campaign (continue-as-new closes a run).
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"campaign {self._name}: cluster {cluster}",
            )
            self._children.append(cluster)
        started = ClusterReport(phase="Progressing", generation=self._state.generation, message="started")
        self._reports[cluster] = started

    async def _measure(self, due: tuple[GateRequest, ...]) -> None:
        """Take the fleet-gate measurements due, each in its cluster (on the member's queue, where
        the worker reaches that cluster and its Prometheus), and record them."""
        taken = await asyncio.gather(*(self._measure_in(request) for request in due))
        spec = self._input.campaign.spec
        for request, measurement in zip(due, taken, strict=True):
            self._state = core.record(spec, self._state, request.cluster, measurement, workflow.now())

    async def _measure_in(self, request: GateRequest) -> Measurement:
        member = next(c for c in self._input.campaign.spec.clusters if c.name == request.cluster)
        try:
            return await workflow.execute_activity_method(
                HealthActivities.measure_changed,
                ChangedNodesMeasureRequest(
                    profile=member_profile(self._name, member.name),
                    check=request.check,
                    prometheus_url=member.prometheus_url or "",
                ),
                task_queue=member_task_queue(workflow.info().task_queue, member.kubeconfig_secret),
                schedule_to_close_timeout=retry.GATE_MEASURE_TIMEOUT,
                retry_policy=retry.GATE_MEASURE,
                summary=f"measure {member.name}: {request.check.name}",
            )
        except ActivityError as failed:
            # The cluster (or its worker) did not answer: an Error, which holds the gate, never
            # fails it.
            cause = str(failed.cause) if failed.cause is not None else str(failed)
            return analysis.error(request.check, f"ClusterUnreachable: {member.name}: {cause}")

    async def _steer(self, decision: CampaignDecision) -> None:
        """Tell every started rollout what changed: abort (the campaign is aborted), roll back
        (the failure rule fired with ``action: rollback``), pause while the campaign holds and
        resume once it stops. Each signal once per change."""
        if self._aborted:
            if not self._aborting:
                self._aborting = True
                await self._signal_rollouts("abort")
            return
        if decision.rollback and not self._rolling_back:
            self._rolling_back = True
            await self._signal_rollouts("roll_back", decision.rollback)
        wanted = "pause" if decision.hold else "resume"
        if wanted != self._sent and (wanted == "pause" or self._sent):
            self._sent = wanted
            await self._signal_rollouts(wanted)

    async def _signal_rollouts(self, signal: str, *args: str) -> None:
        for cluster in self._children:
            handle = workflow.get_external_workflow_handle(
                rollout_workflow_id(member_profile(self._name, cluster))
            )
            await handle.signal(signal, *args)

    def _rollouts_stopped(self) -> bool:
        running = ("Progressing", "Waiting", "Blocked", "RollingBack")
        return all(
            self._reports.get(c, ClusterReport(phase=PENDING)).phase not in running for c in self._children
        )

    def _publish(self, decision: CampaignDecision, phase: str | None = None) -> CampaignProgress:
        progress = self._progress = self._progress_of(decision, phase)
        workflow.upsert_memo({"progress": progress.model_dump(mode="json")})
        workflow.set_current_details(f"{progress.phase}: {progress.message}")
        return progress

    def _progress_of(self, decision: CampaignDecision, phase: str | None = None) -> CampaignProgress:
        spec = self._input.campaign.spec
        index = min(decision.state.stage, len(spec.stages) - 1)
        return CampaignProgress(
            campaign=self._name,
            generation=self._input.campaign.metadata.generation or 0,
            phase=phase or decision.phase.value,
            message=decision.message,
            stage=spec.stages[index].name if decision.phase != CampaignPhase.COMPLETE else "",
            clusters={c.name: self._shown(c.name) for c in spec.clusters},
            rollouts={c: rollout_workflow_id(member_profile(self._name, c)) for c in self._children},
        )

    def _shown(self, cluster: str) -> ClusterReport:
        """A cluster's last report; Pending while its stage has not retargeted it to this generation."""
        report = self._reports.get(cluster)
        if report is None or (
            report.generation < self._state.generation and cluster not in self._state.started
        ):
            earlier = f"at generation {report.generation}" if report is not None else ""
            return ClusterReport(phase=PENDING, generation=self._state.generation, message=earlier)
        return report

    async def _sleep(self, decision: CampaignDecision) -> None:
        timeout = None
        if decision.wake_at is not None:
            timeout = max(decision.wake_at - workflow.now(), timedelta(seconds=1))
        try:
            await workflow.wait_condition(lambda: self._changed, timeout=timeout)
        except TimeoutError:
            return

    async def _continue_as_new_if_long(self) -> None:
        info = workflow.info()
        if info.get_current_history_length() < self._input.settings.history_events_before_continue:
            return
        await workflow.wait_condition(workflow.all_handlers_finished)
        carried = self._input.model_copy(
            update={
                "state": self._state,
                "reports": dict(self._reports),
                "children": tuple(self._children),
                "paused": self._paused,
                "aborted": self._aborted,
            }
        )
        workflow.continue_as_new(
            carried, memo={"progress": self._progress.model_dump(mode="json")} if self._progress else None
        )
