"""The node lifecycle activities (every name in ``NAMES`` but the rollout's observe-and-decide).

Thin, idempotent adapters over ``fleetwright.kube``: each one is safe to run again after a crash
(cordon records its owner, a stage adopts its Job, a status write is keyed). A Node that no longer
exists fails the work activities with ``NodeGone`` (the node workflow ends: the node left the
fleet) and is done for the ones that only show or undo our work (status, uncordon, taint release).
Long ones wait for a *state* with watch windows and heartbeats and honour cancellation; none loops
on errors: taxonomy errors leave as ``ApplicationError`` (``temporal_errors``) and Temporal
retries. Must not decide what happens next on the node; the node workflow does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleetwright.activities import cleanup, nodeprogress, report, runtime_taint
from fleetwright.activities.drain import Drainer
from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import (
    NAMES,
    CleanupReport,
    CleanupRequest,
    CordonReport,
    CordonRequest,
    DrainReport,
    DrainRequest,
    NodeStatusRequest,
    NodeTarget,
    ProtectedPodsRequest,
    RecordStateRequest,
    RuntimeTaintReport,
    StageRequest,
    StagesReport,
    StagesRequest,
    StatusNote,
    UncordonRequest,
    ValidationRequest,
)
from fleetwright.activities.protected import ProtectedPodsWait
from fleetwright.activities.stage import StageRunner
from fleetwright.activities.stages import resume_index, run_stages
from fleetwright.activities.validation import ValidationRunner
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window
from fleetwright.api.keys import state_key
from fleetwright.errors import NodeGoneError
from fleetwright.kube import nodes, nodestatus
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobwatch import JobWatches
from fleetwright.planner.node.state import NodePackageState, format_annotation
from fleetwright.stagejob.outcome import StageReport
from fleetwright.stagejob.validation import ValidationReport

REBOOT_TIMEOUT = "RebootTimeout"
# Threads for blocking API calls: one per concurrent wait window plus headroom, so a window of
# draining nodes never queues behind the default executor's handful of threads.
DEFAULT_THREADS = 64


class NodeActivities:
    """The activities, bound to one API client. Register ``all_activities(api)`` on a worker."""

    def __init__(
        self, api: ApiClient, *, executor: Executor | None = None, job_watches: JobWatches | None = None
    ) -> None:
        self.api = api
        self.executor = executor or ThreadPoolExecutor(DEFAULT_THREADS, thread_name_prefix="fleetwright-kube")
        self.job_watches = job_watches

    @activity.defn(name=NAMES.CORDON)
    @temporal_errors
    async def cordon(self, request: CordonRequest) -> CordonReport:
        await self._show(request, request.show_before)  # first: a human sees why it is cordoned
        result = await blocking(self.executor, nodes.cordon, self.api, request.node, request.profile)
        return CordonReport(ours=result.ours, foreign=result.foreign)

    @activity.defn(name=NAMES.UNCORDON)
    @temporal_errors
    async def uncordon(self, request: UncordonRequest) -> bool:
        try:
            lifted = await blocking(self.executor, nodes.uncordon, self.api, request.node, request.profile)
            await self._show(request, request.show_after)
        except NodeGoneError:
            # A deleted node holds no cordon (nor shows a status): lifting it is done, and the
            # rollout still hears how the node ended.
            await report.send(request.show_after.report if request.show_after else None)
            return False
        return lifted

    @activity.defn(name=NAMES.WAIT_PROTECTED_PODS)
    @temporal_errors
    async def wait_protected_pods(self, request: ProtectedPodsRequest) -> None:
        """Wait while a Running/Pending pod on the node matches the selector (``protected``)."""
        await ProtectedPodsWait(self.api, self.executor, request).run()

    @activity.defn(name=NAMES.DRAIN)
    @temporal_errors
    async def drain(self, request: DrainRequest) -> DrainReport:
        return await Drainer(self.api, self.executor, request).run()

    @activity.defn(name=NAMES.RUN_STAGES)
    @temporal_errors
    async def run_stages(self, request: StagesRequest) -> StagesReport:
        """The node's consecutive stages in order (``stages.run_stages``); a retried attempt
        resumes after the last stage the Node's recorded state shows passed."""
        resumed = 0
        if activity.info().attempt > 1:
            facts, _ = await blocking(self.executor, nodestatus.read_node, self.api, request.node)
            resumed = resume_index(request, facts.annotations.get(state_key(request.profile)))
            if resumed == len(request.stages):
                # Every stage passed before a crash; what shows after the last one (the node's
                # status and its report) may not have: showing it again is harmless.
                last = request.stages[-1]
                await self._show(last, last.show_after)
        return await run_stages(request, self.run_stage, resumed)

    @activity.defn(name=NAMES.RUN_VALIDATION)
    @temporal_errors
    async def run_validation(self, request: ValidationRequest) -> ValidationReport:
        """One validation container of the node gate: its Job created (or adopted, on a retry) and
        waited for, heartbeating; a failure is the report's verdict, not an error."""
        await self._show(request, request.show_before)
        watch = self.job_watches.of(request.namespace) if self.job_watches is not None else None
        return await ValidationRunner(self.api, self.executor, request, watch).verdict()

    @temporal_errors
    async def run_stage(self, request: StageRequest) -> StageReport:
        """One stage: its Job to its report, then (once it passed) the reboot wait, the record and
        the status after it."""
        await self._show(request, request.show_before)
        watch = self.job_watches.of(request.namespace) if self.job_watches is not None else None
        runner = StageRunner(self.api, self.executor, request, watch)
        report = await runner.run()
        if not report.succeeded:
            return report
        if request.reboot_timeout_seconds is not None:
            # The bound counts from the Job's end, which a retried attempt reads off the Job again.
            ended = report.finished_at.timestamp() if report.finished_at is not None else None
            await self._await_reboot(
                request, runner.boot_id_before, request.reboot_timeout_seconds, Clock(started=ended)
            )
        # A crash before the record is written: the retry adopts the finished Job and writes it
        # then. Before a status, in its label's patch (one Node write fewer).
        if request.show_after is not None:
            record = self._annotation(request, request.record) if request.record is not None else None
            await self._show(request, request.show_after, annotations=record)
        elif request.record is not None:
            await self._record(request, request.record)
        return report

    async def _await_reboot(
        self, target: NodeTarget, previous: str, timeout_seconds: int, clock: Clock
    ) -> str:
        """Until the node reports a boot id other than ``previous`` and is Ready (its new boot id),
        or ``timeout_seconds`` on ``clock`` passed (``RebootTimeout``, not retried)."""
        window = heartbeat_window()
        while True:
            facts, version = await blocking(
                self.executor, nodestatus.read_node_to_watch, self.api, target.node
            )
            rebooted = bool(facts.boot_id) and facts.boot_id != previous
            if rebooted and facts.ready:
                return facts.boot_id
            if clock.elapsed() >= timeout_seconds:
                state = (
                    "rebooted but not Ready" if rebooted else f"boot id still {facts.boot_id or 'unknown'}"
                )
                raise ApplicationError(
                    f"node {target.node} not back from reboot after {timeout_seconds}s ({state})",
                    type=REBOOT_TIMEOUT,
                    non_retryable=True,
                )
            clock.beat(boot_id=facts.boot_id, ready=facts.ready)
            seconds = max(1.0, min(window, timeout_seconds - clock.elapsed()))
            await blocking(self.executor, nodestatus.wait_for_node, self.api, target.node, version, seconds)

    @activity.defn(name=NAMES.RECORD_STATE)
    @temporal_errors
    async def record_state(self, request: RecordStateRequest) -> None:
        await self._record(request, request.state)

    async def _record(self, target: NodeTarget, state: NodePackageState) -> None:
        """Merge-patch the profile's one package-state annotation (one writer per key)."""
        record = self._annotation(target, state)
        await blocking(self.executor, nodestatus.merge_metadata, self.api, target.node, annotations=record)

    @staticmethod
    def _annotation(target: NodeTarget, state: NodePackageState) -> dict[str, str]:
        """The profile's package-state annotation for ``state``, which must be ``target``'s."""
        if state.profile != target.profile:
            raise ApplicationError(
                f"state of profile {state.profile!r} sent for {target.profile!r}",
                type="InvalidState",
                non_retryable=True,
            )
        key, value = format_annotation(state)
        return {key: value}

    @activity.defn(name=NAMES.SET_NODE_STATUS)
    @temporal_errors
    async def set_node_status(self, request: NodeStatusRequest) -> None:
        # Nobody can read the status of a deleted node: showing it is done; the report still goes.
        with contextlib.suppress(NodeGoneError):
            await nodeprogress.show(
                self.executor,
                self.api,
                request,
                phase=request.phase,
                reason=request.reason,
                message=request.message,
            )
        await report.send(request.report)

    @activity.defn(name=NAMES.CLEAN_UP)
    @temporal_errors
    async def clean_up(self, request: CleanupRequest) -> CleanupReport:
        """Remove everything the deleted profile wrote on the nodes and release its finalizer."""
        return await blocking(self.executor, cleanup.clean_up, self.api, request)

    @activity.defn(name=NAMES.RELEASE_RUNTIME_TAINT)
    @temporal_errors
    async def release_runtime_taint(self, target: NodeTarget) -> RuntimeTaintReport:
        """Remove the runtime-required taint once no runtime-required profile is incomplete here."""
        try:
            return await blocking(self.executor, runtime_taint.release, self.api, target.node)
        except NodeGoneError:
            return RuntimeTaintReport(removed=False)  # a deleted node carries no taint

    async def _show(
        self, target: NodeTarget, note: StatusNote | None, annotations: Mapping[str, str] | None = None
    ) -> None:
        """Publish ``note`` (with ``annotations`` in its label's patch), then send the report it
        carries."""
        if note is not None:
            await nodeprogress.show(
                self.executor,
                self.api,
                target,
                phase=note.phase,
                reason=note.reason,
                message=note.message,
                annotations=annotations,
            )
            await report.send(note.report)


def all_activities(
    api: ApiClient, *, executor: Executor | None = None, job_watches: JobWatches | None = None
) -> list[Callable[..., Any]]:
    """Every node activity, bound to ``api``, ready for ``Worker(activities=...)``; stage waits share
    ``job_watches`` when given (the worker's), else each reads the API itself."""
    bound = NodeActivities(api, executor=executor, job_watches=job_watches)
    return [
        bound.cordon,
        bound.uncordon,
        bound.wait_protected_pods,
        bound.drain,
        bound.run_stages,
        bound.run_validation,
        bound.record_state,
        bound.set_node_status,
        bound.clean_up,
        bound.release_runtime_taint,
    ]
