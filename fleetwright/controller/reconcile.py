"""The controller: turns NodeProfiles, DeploymentPolicies and Nodes into starts and signals of each
profile's rollout workflow, and mirrors each workflow's published progress into the profile's
status subresource (with Events on the profile for transitions a human cares about).

It owns watching (through ``fleetwright.kube.listwatch``), the start/signal calls and the status
writes. It must not write node state or decide anything about a rollout: the workflow is the one
writer per profile, and a spec change is a signal to it, never a second writer. The one exception
is the runtime-required taint on a node that just joined (``autoTaintNewNodes``): the webhook adds
it at admission, and this is the fallback for a node admitted while the webhook was unreachable
(it must land before the scheduler places workloads, which a workflow turn cannot promise); it is
idempotent, so two replicas adding it agree, and the node workflows remove it (``planner.profile.runtime``).
The Nodes' side (that taint, and ``nodes_changed`` to the rollouts) is ``nodewatch``'s.

Restarts and replicas need no leader election:
- Nothing lives only here. Desired state is in the CRs, rollout state in Temporal; the in-memory
  "last signalled" table is rebuilt on start by signalling every profile once (``spec_changed``
  with an unchanged spec is a no-op retarget; ``pause``/``resume`` just set a flag), so a
  restart costs one extra decision per profile and a few seconds of stale status.
- Two replicas cannot double-start: the workflow id is ``nodeprofile/<name>`` and starts use
  ``USE_EXISTING``, so the second start returns the running workflow. Duplicate signals are
  idempotent for the same reason as above.
- One task reconciles: the consumer of the watch events. The status mirror only asks it (through
  the same queue) to retry the starts that failed, so two reconciles of one profile never
  interleave and an older spec can never be signalled after a newer one.
- Status is a derived view (``worker.profilestatus``: a pure function of the memo, the generation and the
  previous status), written whole; two replicas compute the same value, so they never fight.
  Events are keyed by the transition and the CR version they were seen at, so both replicas
  create the same Event name and the second gets a 409.
Status comes from ``describe()`` (memo ``progress``), never from a query, so it keeps flowing while
no worker polls.

Abort is durable for the profile's generation: a rollout whose last run ended ``Aborted`` at the
profile's current generation is not started again (``USE_EXISTING`` only finds a *running*
workflow, so a restarted controller re-listing the profiles would otherwise silently undo the
abort). A new generation (a spec edit), an explicit resume seen by this controller (the
``fleetwright.io/paused`` annotation cleared) or a deletion starts it again.

Deletion: the controller adds the ``fleetwright.io/node-cleanup`` finalizer before it starts a
profile's workflow; when the profile gets a deletionTimestamp it signals ``delete`` (starting the
workflow first if it ended), and the workflow uninstalls, cleans the nodes and releases the
finalizer itself, so the deletion finishes even while no controller runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.api.common import API_VERSION
from fleetwright.api.deploymentpolicy import BUILTIN_POLICY, BUILTIN_POLICY_NAME, DeploymentPolicy
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.keys import FINALIZER, PAUSED_ANNOTATION
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.api.nodeprofile import NodeProfile, NodeProfileStatus
from fleetwright.controller.campaigns import CampaignController
from fleetwright.controller.nodewatch import NodeWatch
from fleetwright.controller.profilestatus import Inputs, derive, transitions
from fleetwright.errors import FleetwrightError
from fleetwright.eventwait import wait_event
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.kube.events import emit_for
from fleetwright.kube.listwatch import ListWatch, WatchEvent, start_thread
from fleetwright.kube.resources import add_finalizer, patch_status
from fleetwright.process import metrics
from fleetwright.process.settings import WorkerSettings
from fleetwright.process.temporalclient import connect_with
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import Controls, Deletion, Progress, RolloutInput, SpecChange
from fleetwright.workflows.progress import rollout_details, rollout_summary
from fleetwright.workflows.rollout import ABORTED, RolloutWorkflow

log = logging.getLogger("fleetwright.controller")

NODES = "nodes"


@dataclass(frozen=True)
class ControllerOptions:
    status_interval_seconds: float = 5.0
    """Mirror every profile's status at least this often (also re-tries failed starts)."""
    refresh_delay_seconds: float = 0.5
    """After a signal, mirror again this soon: long enough for the workflow to have acted on it."""
    node_signal_delay_seconds: float = 0.5
    """Coalesce node churn (a fleet joining) into one ``nodes_changed`` per rollout."""
    watch_window_seconds: int = 30


@dataclass(frozen=True)
class Signalled:
    """What this process last told a profile's workflow: (profile generation, policy version) and
    the pause flag. Comparing against it makes repeated watch events free."""

    spec: tuple[int, str]
    paused: bool
    deleting: bool = False


class Controller:
    def __init__(
        self, client: Client, api: ApiClient, settings: WorkerSettings, options: ControllerOptions
    ) -> None:
        self.client, self.api, self.settings, self.options = client, api, settings, options
        self.profiles: dict[str, dict[str, Any]] = {}
        self.policies: dict[str, dict[str, Any]] = {}
        self._signalled: dict[str, Signalled] = {}
        # A watch event, or None: the mirror loop asking to retry the starts that failed.
        self._events: asyncio.Queue[tuple[str, WatchEvent] | None] = asyncio.Queue()
        self._refresh = asyncio.Event()
        self._dirty: set[str] = set()
        self.nodes = NodeWatch(client, api, self.profiles, self._signalled, options.node_signal_delay_seconds)

    # ----- lifecycle ----------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        watch_stop = threading.Event()
        for kind in (POLICY_PLURAL, PROFILE_PLURAL, NODES):
            start_thread(
                ListWatch(
                    self.api,
                    kind,  # type: ignore[arg-type]
                    deliver=_forwarder(loop, self._events, kind, watch_stop),
                    stop=watch_stop,
                    window_seconds=self.options.watch_window_seconds,
                )
            )
        tasks = [asyncio.create_task(self._consume()), asyncio.create_task(self._mirror_loop())]
        try:
            await stop.wait()
        finally:
            watch_stop.set()
            self.nodes.stop()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ----- watch events -> caches -> reconcile --------------------------------------------------
    async def _consume(self) -> None:
        """The one task that reconciles profiles, one at a time."""
        while True:
            self._take(await self._events.get())
            while not self._events.empty():  # a burst (a relist) costs one pass
                self._take(self._events.get_nowait())
            dirty, self._dirty = self._dirty, set()
            for name in sorted(dirty):
                await self._reconcile(name)

    def _take(self, item: tuple[str, WatchEvent] | None) -> None:
        if item is None:
            self._dirty |= {n for n in self.profiles if n not in self._signalled}
        else:
            self._apply(*item)

    def _apply(self, kind: str, event: WatchEvent) -> None:
        if kind == NODES:
            self.nodes.apply(event)
            return
        cache = self.profiles if kind == PROFILE_PLURAL else self.policies
        if event.type == "SYNC":
            fresh = {o["metadata"]["name"]: o for o in event.items}
            gone = set(cache) - set(fresh)
            cache.clear()
            cache.update(fresh)
            changed = set(fresh) | gone
        else:
            assert event.obj is not None
            name = event.obj["metadata"]["name"]
            if event.type == "DELETED":
                cache.pop(name, None)
            else:
                cache[name] = event.obj
            changed = {name}
        if kind == PROFILE_PLURAL:
            self._dirty |= changed
        else:
            self._dirty |= {p for p, o in self.profiles.items() if _policy_ref(o) in changed}

    async def _reconcile(self, name: str) -> None:
        """Start the profile's workflow if absent and tell it what changed since the last signal."""
        obj = self.profiles.get(name)
        if obj is None:
            await self._forget(name)
            return
        deleting = _deleting(obj)
        if deleting and FINALIZER not in (obj["metadata"].get("finalizers") or []):
            return  # released (the workflow is done) or never ours: nothing left to do
        policy = self._policy_for(obj)
        if policy is None and not deleting:
            return  # the status says PolicyNotFound; the policy's ADDED event brings us back
        want = Signalled(
            spec=(obj["metadata"].get("generation") or 0, _version_of(policy) if policy else ""),
            paused=_paused(obj),
            deleting=deleting,
        )
        before = self._signalled.get(name)
        if before == want:
            return
        try:
            resumed = before is not None and before.paused and not want.paused
            if not deleting and not resumed and await self._aborted_at(name) == want.spec[0]:
                log.info(
                    "profile %s: its rollout was aborted at generation %d; not restarted", name, want.spec[0]
                )
                self._signalled[name] = want
                return
            if not deleting:
                obj = await self._hold_finalizer(name, obj)
            profile = NodeProfile.model_validate(_without_status(obj))
            handle = await self._ensure_started(
                profile, policy or BUILTIN_POLICY, paused=want.paused, deleting=deleting
            )
            if deleting:
                if before is None or not before.deleting:
                    await handle.signal(RolloutWorkflow.delete, Deletion(profile=profile, policy=policy))
            elif policy is not None and (before is None or before.spec != want.spec):
                # After a restart (before is None) this re-sends an unchanged spec: a no-op retarget.
                await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=profile, policy=policy))
            if before is None or before.paused != want.paused:
                await handle.signal(RolloutWorkflow.pause if want.paused else RolloutWorkflow.resume)
        except (RPCError, ValidationError, FleetwrightError) as error:
            log.warning("profile %s: could not start or signal its rollout: %s", name, error)
            self._signalled.pop(name, None)  # the periodic resync tries again
            return
        self._signalled[name] = want
        asyncio.get_running_loop().call_later(self.options.refresh_delay_seconds, self._refresh.set)

    async def _hold_finalizer(self, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Add the finalizer before the first node is touched, so no deletion can skip clean-up."""
        held = await asyncio.to_thread(add_finalizer, self.api, PROFILE_PLURAL, obj, FINALIZER)
        if held is not obj and name in self.profiles:
            self.profiles[name] = held
        return held

    async def _ensure_started(
        self, profile: NodeProfile, policy: DeploymentPolicy, *, paused: bool, deleting: bool = False
    ) -> WorkflowHandle[RolloutWorkflow, Progress]:
        # Paused (or deleting) from the start rides in the input, so not even the first decision
        # starts a node towards the wrong target.
        rollout = RolloutInput(
            profile=profile,
            policy=policy,
            settings=self.settings.engine,
            controls=Controls(paused=paused, deleting=deleting),
        )
        return await self.client.start_workflow(
            RolloutWorkflow.run,
            rollout,
            id=rollout_workflow_id(profile.metadata.name),
            task_queue=self.settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # What the UI shows of the run (a run continued as new shows only its current details).
            static_summary=rollout_summary(rollout),
            static_details=rollout_details(rollout),
        )

    async def _forget(self, name: str) -> None:
        """The CR is gone. With our finalizer that happens after the workflow cleaned up and ended;
        a profile that never carried it (created before this controller) is only aborted."""
        if self._signalled.pop(name, None) is None:
            return
        with contextlib.suppress(RPCError):
            await self.client.get_workflow_handle(rollout_workflow_id(name)).signal(RolloutWorkflow.abort)

    def _policy_for(self, obj: dict[str, Any]) -> DeploymentPolicy | None:
        ref = _policy_ref(obj)
        if ref is None:
            return BUILTIN_POLICY
        policy_obj = self.policies.get(ref)
        if policy_obj is None:
            return None
        try:
            return DeploymentPolicy.model_validate(_without_status(policy_obj))
        except ValidationError as error:
            log.warning("DeploymentPolicy %s does not parse: %s", ref, error)
            return None

    # ----- status mirror ----------------------------------------------------------------------
    async def _mirror_loop(self) -> None:
        while True:
            if any(n not in self._signalled for n in self.profiles):
                self._events.put_nowait(None)  # the consumer retries the failed starts
            for name in sorted(self.profiles):
                try:
                    await self.mirror(name)
                except (RPCError, FleetwrightError) as error:
                    log.warning("profile %s: status not updated: %s", name, error)
            self._refresh.clear()
            await wait_event(self._refresh, self.options.status_interval_seconds)

    async def mirror(self, name: str) -> None:
        """Write one profile's status from its workflow's memo, and the Events for what changed."""
        obj = self.profiles.get(name)
        if obj is None:
            return
        workflow_id = rollout_workflow_id(name)
        progress = await self._progress(workflow_id)
        metrics.record_progress(name, progress)
        ref = _policy_ref(obj)
        inputs = Inputs(
            generation=obj["metadata"].get("generation") or 0,
            workflow_id=workflow_id,
            policy=ref or BUILTIN_POLICY_NAME,
            progress=progress,
            policy_missing=ref is not None and ref not in self.policies,
            deleting=_deleting(obj),
            namespace=self.settings.temporal_namespace,
        )
        previous = _status_of(obj)
        # metav1.Time has second precision: keep ours the same so re-reads compare equal.
        status = derive(inputs, previous, datetime.now(UTC).replace(microsecond=0))
        if status == previous:
            return
        updated = await asyncio.to_thread(patch_status, self.api, PROFILE_PLURAL, name, status)
        if name in self.profiles:
            self.profiles[name] = updated
        for change in transitions(previous, status):
            await asyncio.to_thread(
                emit_for,
                self.api,
                api_version=API_VERSION,
                kind="NodeProfile",
                name=name,
                uid=obj["metadata"].get("uid") or "",
                type_=change.type,
                reason=change.reason,
                note=change.note,
                key=f"{obj['metadata'].get('uid')}/{change.reason}/{obj['metadata'].get('resourceVersion')}",
            )

    async def _progress(self, workflow_id: str) -> Progress | None:
        return (await self._last_run(workflow_id))[1]

    async def _last_run(self, workflow_id: str) -> tuple[WorkflowExecutionStatus | None, Progress | None]:
        """The status and published progress of the workflow's latest run (None, None if none)."""
        try:
            description = await self.client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None, None
            raise
        progress: Progress | None = await description.memo_value("progress", None, type_hint=Progress)
        return description.status, progress

    async def _aborted_at(self, name: str) -> int | None:
        """The profile generation at which its rollout's last run ended Aborted, if it did."""
        status, progress = await self._last_run(rollout_workflow_id(name))
        if status in (None, WorkflowExecutionStatus.RUNNING) or progress is None or progress.phase != ABORTED:
            return None
        return progress.generation


async def run_controller(
    settings: WorkerSettings, stop_event: asyncio.Event, options: ControllerOptions | None = None
) -> None:
    """Run the controller until ``stop_event`` is set."""
    api = from_kubeconfig(settings.kubeconfig)
    client = await connect_with(settings)
    controller = Controller(client, api, settings, options or ControllerOptions())
    campaigns = CampaignController(client, api, settings)
    log.info("controller watching profiles and campaigns for task queue %s", settings.task_queue)
    await asyncio.gather(controller.run(stop_event), campaigns.run(stop_event))


# ----- small pure helpers ------------------------------------------------------------------------
def _forwarder(
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue[tuple[str, WatchEvent] | None],
    kind: str,
    stop: threading.Event,
) -> Any:
    """The watcher threads' callback: hand the event to the controller's loop."""

    def deliver(event: WatchEvent) -> None:
        if stop.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under a stopping watcher
            loop.call_soon_threadsafe(queue.put_nowait, (kind, event))

    return deliver


def _policy_ref(obj: dict[str, Any]) -> str | None:
    ref = ((obj.get("spec") or {}).get("deploymentPolicyRef") or {}).get("name")
    return ref if isinstance(ref, str) and ref else None


def _version_of(policy: DeploymentPolicy) -> str:
    return f"{policy.metadata.name}@{policy.metadata.generation or 0}"


def _deleting(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _paused(obj: dict[str, Any]) -> bool:
    annotations = obj["metadata"].get("annotations") or {}
    return str(annotations.get(PAUSED_ANNOTATION, "")).lower() == "true"


def _without_status(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "status"}


def _status_of(obj: dict[str, Any]) -> NodeProfileStatus | None:
    raw = obj.get("status")
    if not raw:
        return None
    try:
        return NodeProfileStatus.model_validate(raw)
    except ValidationError:
        return None  # written by someone else or an older shape: replaced whole
