"""The controller's campaigns: starts each Campaign's workflow (``campaign/<name>``) with the
DeploymentPolicies it names, aborts it when the Campaign is deleted (or gone: a campaign workflow
of its task queue runs without its Campaign, deleted while no controller ran), and mirrors what
the workflow publishes into the Campaign's status, naming a member cluster whose rollout cannot
reach its API server (its activities retry with ``ApiUnreachable``) as ``Unreachable``: waited
for, never counted as failed nodes.

Like the profiles' controller it keeps nothing that matters in memory: starts use
``USE_EXISTING`` and the status is derived whole from the memo and the rollouts' descriptions.
Must not decide anything about a campaign (``planner.campaign`` and the workflow do)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.api.campaign import PLURAL, Campaign, CampaignStatus, ClusterStatus
from fleetwright.api.conditions import Condition, ConditionStatus, set_condition
from fleetwright.api.deploymentpolicy import BUILTIN_POLICY, DeploymentPolicy
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.keys import PAUSED_ANNOTATION
from fleetwright.errors import FleetwrightError
from fleetwright.eventwait import wait_event
from fleetwright.kube.client import ApiClient
from fleetwright.kube.resources import list_objects, patch_status
from fleetwright.process.settings import WorkerSettings
from fleetwright.workflows.campaign import ABORTED, CAMPAIGN_WORKFLOW, CampaignWorkflow
from fleetwright.workflows.ids import campaign_of, campaign_workflow_id, node_workflow_id
from fleetwright.workflows.payloads import CampaignChange, CampaignInput, CampaignProgress, Progress

log = logging.getLogger("fleetwright.controller.campaigns")

UNREACHABLE_TYPES = ("ApiUnreachable", "ApiUnavailable")
"""Failure types of an activity that could not reach its cluster's API server."""
NODES_LOOKED_AT = 10
"""A rollout's running nodes whose workflows are looked at for a failing activity."""


def policies_for(campaign: Campaign, objects: list[dict[str, Any]]) -> dict[str, DeploymentPolicy]:
    """Every DeploymentPolicy the campaign and its stages name, by name ("" the built-in one);
    ``KeyError`` names one that does not exist or does not parse."""
    named = {r.name for r in [campaign.spec.policy, *(s.policy for s in campaign.spec.stages)] if r}
    found = {o["metadata"]["name"]: o for o in objects if o["metadata"]["name"] in named}
    policies: dict[str, DeploymentPolicy] = {"": BUILTIN_POLICY}
    for name in sorted(named):
        if name not in found:
            raise KeyError(f"DeploymentPolicy {name} not found")
        try:
            policies[name] = DeploymentPolicy.model_validate(
                {k: v for k, v in found[name].items() if k != "status"}
            )
        except ValidationError as error:
            raise KeyError(f"DeploymentPolicy {name} does not parse: {error}") from None
    return policies


def derive(
    campaign: Campaign,
    progress: CampaignProgress | None,
    unreachable: Mapping[str, str],
    now: datetime,
) -> CampaignStatus:
    """The Campaign's status from what its workflow published and which clusters cannot be reached."""
    generation = campaign.metadata.generation or 0
    previous = campaign.status or CampaignStatus()
    clusters = [
        _cluster(name, progress, unreachable.get(name)) for name in (c.name for c in campaign.spec.clusters)
    ]
    phase = progress.phase if progress is not None else "Pending"
    message = progress.message if progress is not None else "the campaign's workflow has not published yet"
    conditions = list(previous.conditions)
    for type_, status, reason, text in _conditions(phase, message, unreachable):
        conditions = set_condition(
            conditions,
            Condition(
                type=type_,
                status=status,
                observed_generation=generation,
                last_transition_time=now,
                reason=reason,
                message=text[:32768],
            ),
        )
    return CampaignStatus(
        observed_generation=generation,
        conditions=conditions,
        phase=phase,
        stage=(progress.stage or None) if progress is not None else None,
        clusters=clusters,
        workflow_id=campaign_workflow_id(campaign.metadata.name or ""),
    )


def _cluster(name: str, progress: CampaignProgress | None, unreachable: str | None) -> ClusterStatus:
    report = progress.clusters.get(name) if progress is not None else None
    if report is None:
        return ClusterStatus(
            name=name, phase="Unreachable" if unreachable else "Pending", message=unreachable or ""
        )
    return ClusterStatus(
        name=name,
        phase="Unreachable" if unreachable else report.phase,
        nodes_targeted=report.targeted,
        nodes_complete=report.updated,
        nodes_failed=report.failed,
        message=(unreachable or report.message)[:4096],
    )


def _conditions(
    phase: str, message: str, unreachable: Mapping[str, str]
) -> list[tuple[str, ConditionStatus, str, str]]:
    true: ConditionStatus = "True"
    false: ConditionStatus = "False"
    unreached = "; ".join(f"{name}: {why}" for name, why in sorted(unreachable.items()))
    progressing = phase in ("Progressing", "Waiting", "Pending")
    fired = phase in ("Halted", "RollingBack", "RolledBack")
    return [
        ("Ready", true if phase == "Complete" else false, phase or "Pending", message),
        (
            "Progressing",
            true if progressing else false,
            "ClusterUnreachable" if unreached else (phase or "Pending"),
            f"waiting for unreachable clusters: {unreached}" if unreached else message,
        ),
        ("Paused", true if phase == "Paused" else false, "Paused" if phase == "Paused" else "NotPaused", ""),
        (
            "Degraded",
            true if fired else false,
            "FailureRuleFired" if fired else "AsExpected",
            message if fired else "",
        ),
    ]


async def unreachable_clusters(client: Client, progress: CampaignProgress | None) -> dict[str, str]:
    """cluster -> why it cannot be reached, for the started clusters whose rollout (or one of its
    first running nodes' workflows) retries an activity that failed to reach the API server."""
    found: dict[str, str] = {}
    for cluster, workflow_id in (progress.rollouts if progress else {}).items():
        why = await _retrying(client, workflow_id)
        if why is None:
            rollout = await _described(client, workflow_id)
            shown = await rollout.memo_value("progress", None, type_hint=Progress) if rollout else None
            for node in (shown.running_nodes if shown else ())[:NODES_LOOKED_AT]:
                why = await _retrying(client, node_workflow_id(shown.profile if shown else "", node))
                if why is not None:
                    break
        if why is not None:
            found[cluster] = why
    return found


async def _described(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return None


async def _retrying(client: Client, workflow_id: str) -> str | None:
    """Why the workflow's pending activity cannot reach its API server (None: it is not retrying
    for that)."""
    description = await _described(client, workflow_id)
    for activity in description.raw_description.pending_activities if description else ():
        failure = activity.last_failure
        if activity.attempt > 1 and failure.application_failure_info.type in UNREACHABLE_TYPES:
            return f"{failure.message} (attempt {activity.attempt})"
    return None


class CampaignController:
    """Starts, aborts and mirrors every Campaign's workflow, every ``interval`` seconds."""

    def __init__(
        self, client: Client, api: ApiClient, settings: WorkerSettings, interval: float = 5.0
    ) -> None:
        self.client, self.api, self.settings, self.interval = client, api, settings, interval
        self._paused: dict[str, bool] = {}
        """Campaign -> the pause state last signalled (rebuilt by signalling once after a restart)."""

    async def run(self, stop: asyncio.Event) -> None:
        warned = ""
        while not stop.is_set():
            try:
                await self.reconcile()
                warned = ""
            except (FleetwrightError, RPCError) as error:
                if str(error) != warned:  # once per problem: no Campaign CRD is not news every pass
                    log.warning("campaigns not reconciled: %s", error)
                    warned = str(error)
            except Exception:  # the campaigns must never take the profiles' controller down
                log.exception("campaigns not reconciled")
            await wait_event(stop, self.interval)

    async def reconcile(self) -> None:
        objects = await asyncio.to_thread(list_objects, self.api, PLURAL)
        policies = await asyncio.to_thread(list_objects, self.api, POLICY_PLURAL)
        for obj in objects:
            try:
                campaign = Campaign.model_validate(obj)
            except ValidationError as error:
                log.warning("Campaign %s does not parse: %s", obj["metadata"]["name"], error)
                continue
            if obj["metadata"].get("deletionTimestamp"):
                await self._abort(campaign.metadata.name or "")
                continue
            await self._reconcile(campaign, policies, paused=_paused(obj))
        for gone in await self._orphaned({str(obj["metadata"]["name"]) for obj in objects}):
            log.info("Campaign %s is gone: aborting its workflow", gone)
            await self._abort(gone)

    async def _orphaned(self, listed: set[str]) -> list[str]:
        """The campaigns whose workflow runs on this controller's task queue without their Campaign:
        deleted, also while no controller ran (a listed Campaign that does not parse is kept)."""
        query = (
            f"WorkflowType = '{CAMPAIGN_WORKFLOW}' AND ExecutionStatus = 'Running' "
            f"AND TaskQueue = '{self.settings.task_queue}'"
        )
        running = {campaign_of(execution.id) async for execution in self.client.list_workflows(query)}
        return sorted(running - listed)

    async def _reconcile(self, campaign: Campaign, policies: list[dict[str, Any]], *, paused: bool) -> None:
        name = campaign.metadata.name or ""
        try:
            resolved = policies_for(campaign, policies)
        except KeyError as error:
            log.warning("Campaign %s: %s", name, error.args[0])
            return
        running, progress = await self._last_run(name)
        generation = campaign.metadata.generation or 0
        aborted = progress is not None and progress.phase == ABORTED and progress.generation == generation
        if not running and not aborted:  # an abort holds for the generation it was given at
            await self.client.start_workflow(
                CampaignWorkflow.run,
                CampaignInput(
                    campaign=campaign, policies=resolved, settings=self.settings.engine, paused=paused
                ),
                id=campaign_workflow_id(name),
                task_queue=self.settings.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"campaign {name}: {len(campaign.spec.clusters)} clusters",
            )
            running, progress = await self._last_run(name)
            self._paused[name] = paused
        if running and progress is not None and progress.generation < generation:
            change = CampaignChange(campaign=campaign, policies=resolved)
            await self.client.get_workflow_handle(campaign_workflow_id(name)).signal(
                CampaignWorkflow.spec_changed, change
            )
        if running and self._paused.get(name) != paused:
            handle = self.client.get_workflow_handle(campaign_workflow_id(name))
            await handle.signal(CampaignWorkflow.pause if paused else CampaignWorkflow.resume)
            self._paused[name] = paused
        unreachable = await unreachable_clusters(self.client, progress)
        status = derive(campaign, progress, unreachable, datetime.now(UTC))
        if status != campaign.status:
            await asyncio.to_thread(patch_status, self.api, PLURAL, name, status)

    async def _last_run(self, name: str) -> tuple[bool, CampaignProgress | None]:
        """Whether the campaign's workflow runs, and what its latest run published."""
        try:
            description = await self.client.get_workflow_handle(campaign_workflow_id(name)).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return False, None
            raise
        progress: CampaignProgress | None = await description.memo_value(
            "progress", None, type_hint=CampaignProgress
        )
        return description.status == WorkflowExecutionStatus.RUNNING, progress

    async def _abort(self, name: str) -> None:
        try:
            await self.client.get_workflow_handle(campaign_workflow_id(name)).signal(CampaignWorkflow.abort)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise


def _paused(obj: dict[str, Any]) -> bool:
    annotations = obj["metadata"].get("annotations") or {}
    return str(annotations.get(PAUSED_ANNOTATION, "")).lower() == "true"
