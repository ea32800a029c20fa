"""Running one package stage on one node as a Job: the package ConfigMap, creating or adopting the
Job ``fleetwright.stagejob`` renders, and waiting until ``stagejob.outcome`` reads a report off it.
The create-or-adopt and the wait are ``JobRunner``'s, which the node gate's validation Jobs share
(``activities.validation``); ``StageRunner`` adds what only a stage needs.

A retried activity adopts the Job its earlier attempt created (deterministic name, 409 = adopt), so
a worker crash never runs a stage twice. A Job that cannot pull its image fails the stage after a
bound instead of hanging; the Job is suspended, annotated with the verdict and kept, like every
failed Job, for inspection. It must not decide what runs next (the node workflow does).
"""

from __future__ import annotations

from concurrent.futures import Executor
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwright.activities import nodeprogress
from fleetwright.activities.payloads import NodePhase, StageRequest, WaitTarget
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window, tell_rollout
from fleetwright.api import keys
from fleetwright.api.keys import NodeReason
from fleetwright.errors import NotFoundError, RetryableError
from fleetwright.kube import jobs, nodestatus, pods
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts
from fleetwright.kube.jobwatch import JobWatch
from fleetwright.kube.pods import PodFacts
from fleetwright.stagejob.outcome import (
    StageOutcome,
    StageReport,
    has_verdict,
    outcome,
    pull_wait,
    verdict_notes,
    waits,
)
from fleetwright.stagejob.render import mounted_config_map
from fleetwright.stagejob.request import job_spec, manifest


class JobRunner:
    """Creates or adopts one Job on one node and waits until ``stagejob.outcome`` reads its report:
    the wait every Job fleetwright runs on a node shares (stage Jobs, validation Jobs). Subclasses
    render the Job and may prepare its prerequisites and read what an adopted Job kept."""

    def __init__(
        self,
        api: ApiClient,
        executor: Executor,
        target: WaitTarget,
        pull_timeout_seconds: int,
        watch: JobWatch | None = None,
    ) -> None:
        self.api, self.executor, self.target = api, executor, target
        self.pull_bound = timedelta(seconds=pull_timeout_seconds)
        self.watch = watch
        """The worker's shared watch of the namespace's Jobs; without it each wait reads the API."""
        self.shown: str | None = None
        """The pull wait this attempt made visible on the node, if any."""
        self.job: JobFacts | None = None
        """The Job once created or adopted."""

    def manifest(self) -> dict[str, Any]:
        """The Job to create."""
        raise NotImplementedError

    async def _prepare(self, rendered: dict[str, Any]) -> None:
        """Before the create: what the Job needs, and notes to keep on it (none here)."""

    def _adopted(self, job: JobFacts, rendered: dict[str, Any]) -> None:
        """After the create or adoption: what an adopted Job kept (nothing here)."""

    async def run(self) -> StageReport:
        rendered = self.manifest()
        await self._prepare(rendered)
        job, created = await blocking(self.executor, jobs.create_or_adopt, self.api, rendered)
        self.job = job
        self._adopted(job, rendered)
        return await self._until_outcome(job, created)

    async def _until_outcome(self, job: JobFacts, created: bool) -> StageReport:
        clock = Clock()
        window = heartbeat_window()
        bound = self.pull_bound
        quiet = False  # the last wait window passed with no change to the Job
        while True:
            try:
                job, version = await self._read(job)
            except NotFoundError:
                return StageReport(
                    job=job.name,
                    outcome=StageOutcome.FAILED,
                    message="the Job was deleted while running",
                )
            # A pod stuck pulling, or one whose Node was deleted, leaves the Job unchanged: look at
            # the pods and the Node once a window passed quietly, not on each of the Job's own
            # changes (most wake-ups; two reads fewer each). A running pod is never stuck pulling.
            stuck = job.finished is None and job.ready == 0 and quiet
            looked = job.finished == "Failed" or stuck
            listed = await self._pods(job) if looked else []
            if stuck:
                # A deleted Node never runs the pod: end with NodeGone now (the node left the fleet)
                # rather than wait out the Job's deadline and report a failure.
                await blocking(self.executor, nodestatus.read_node, self.api, self.target.node)
            success = self.watch.succeeded(job) if self.watch is not None else None
            report = outcome(job, listed, datetime.now(UTC), bound, success)
            if report is not None:
                if report.succeeded:
                    await self._show_pull_wait(None, bound)
                await self._settle(job, report)
                return report
            if looked or job.ready > 0:
                await self._show_pull_wait(pull_wait(listed), bound)
            clock.beat(
                job=job.name, created=created, active=job.active, ready=job.ready, waiting=waits(listed)
            )
            quiet = not await self._wait(job, version, window)

    async def _read(self, job: JobFacts) -> tuple[JobFacts, str]:
        """The Job from the shared watch: as it last saw it, or, just created and not seen yet, as
        the create returned it (the watch wakes the wait when it sees it change). From the API only
        while the watch is relisting, or once it saw the Job deleted: the facts and the version a
        wait for its next change starts at."""
        if self.watch is not None and self.watch.synced:
            seen = self.watch.get(job.name)
            if seen is not None:
                return seen, seen.version
            if job.version and not self.watch.gone(job.name):
                return job, job.version
        return await blocking(self.executor, jobs.read_job, self.api, job.namespace, job.name)

    async def _pods(self, job: JobFacts) -> list[PodFacts]:
        """The Job's pods: a running Job's unfinished ones from the shared watch once it has listed
        (a label-selected list scans every kept stage pod of the namespace); a failed Job's from
        the API (the watch keeps no finished pod)."""
        seen = self.watch.pods_of(job) if self.watch is not None and job.finished is None else None
        if seen is not None:
            return seen
        return await blocking(self.executor, pods.job_pods, self.api, job.namespace, job.name)

    async def _wait(self, job: JobFacts, version: str, window: float) -> bool:
        """Until the Job changes or ``window`` passes: on the shared watch (no request, no thread)
        when it is listed, else with a watch request of this wait's own."""
        if self.watch is not None and self.watch.synced:
            return await self.watch.wait(job.name, job.version, window, job.uid)
        return await blocking(
            self.executor, jobs.wait_for_job, self.api, job.namespace, job.name, version, window
        )

    async def _show_pull_wait(self, wait: str | None, bound: timedelta) -> None:
        """A pull wait is a blocked wait: shown on the node as soon as it is seen (condition, label,
        Warning event), not only when its bound fails the stage; lifted when the image arrives."""
        if wait is not None and self.shown is None:
            message = f"{wait}; the Job fails if it lasts {int(bound.total_seconds())}s"
            await self._show(NodePhase.BLOCKED, NodeReason.IMAGE_PULL_WAITING, message)
            await tell_rollout(self.target.rollout_workflow_id)
            self.shown = wait
        elif wait is None and self.shown is not None:
            await self._show(NodePhase.IN_PROGRESS, NodeReason.IMAGE_PULLED, "the image was pulled")
            await tell_rollout(self.target.rollout_workflow_id)
            self.shown = None

    async def _show(self, phase: NodePhase, reason: str, message: str) -> None:
        await nodeprogress.show(
            self.executor, self.api, self.target, phase=phase, reason=reason, message=message
        )

    async def _settle(self, job: JobFacts, report: StageReport) -> None:
        """An image-pull verdict stops the Job's pod (no endless pulling on the node) and is written
        on the Job, so an adopting retry returns the same report."""
        if report.outcome is StageOutcome.IMAGE_PULL_FAILED and not has_verdict(job):
            notes = verdict_notes(report)
            await blocking(self.executor, jobs.suspend_with_note, self.api, job.namespace, job.name, notes)


class StageRunner(JobRunner):
    """Runs one StageRequest to its report."""

    def __init__(
        self, api: ApiClient, executor: Executor, request: StageRequest, watch: JobWatch | None = None
    ) -> None:
        super().__init__(api, executor, request, request.image_pull_timeout_seconds, watch)
        self.request = request
        self.boot_id_before = ""
        """For a reboot wait (``request.reboot_timeout_seconds``): the boot id before the Job."""

    def manifest(self) -> dict[str, Any]:
        return manifest(self.request)

    async def _prepare(self, rendered: dict[str, Any]) -> None:
        await self._prerequisites()
        if self.request.pass_id:
            await self._earlier_pass_done(rendered)
        if self.request.reboot_timeout_seconds is not None:
            facts, _ = await blocking(self.executor, nodestatus.read_node, self.api, self.request.node)
            rendered["metadata"]["annotations"][keys.BOOT_ID_BEFORE_ANNOTATION] = facts.boot_id

    def _adopted(self, job: JobFacts, rendered: dict[str, Any]) -> None:
        # An adopted Job keeps the boot id its first attempt read (the node may have rebooted since).
        notes = rendered["metadata"]["annotations"]
        self.boot_id_before = job.annotations.get(
            keys.BOOT_ID_BEFORE_ANNOTATION, notes.get(keys.BOOT_ID_BEFORE_ANNOTATION, "")
        )

    async def _earlier_pass_done(self, rendered: dict[str, Any]) -> None:
        """Each pass names its own Jobs, so an earlier pass's Job of this stage may still run on the
        node (its workflow was terminated, or the node reset with --force): two executors must never
        share the host paths, so this stage waits (Temporal retries) until that Job has finished."""
        labels = rendered["metadata"]["labels"]
        same = {
            key: labels[key]
            for key in (keys.PROFILE_LABEL, keys.NODE_LABEL, keys.STAGE_LABEL, keys.PACKAGE_LABEL)
        }
        running = [
            job.name
            for job in await self._labelled(same)
            if job.name != rendered["metadata"]["name"] and job.finished is None and job.active > 0
        ]
        if running:
            raise RetryableError(
                f"stage Job {', '.join(running)} of an earlier pass still runs on {self.request.node}",
                reason="EarlierPassRunning",
            )

    async def _labelled(self, labels: dict[str, str]) -> list[JobFacts]:
        """The namespace's stage Jobs carrying ``labels``: from the shared watch once it listed
        (a label-selected list scans every Job of the namespace), else from the API."""
        seen = self.watch.labelled(labels) if self.watch is not None else None
        if seen is not None:
            return seen
        return await blocking(self.executor, jobs.labelled_jobs, self.api, self.request.namespace, labels)

    async def _prerequisites(self) -> None:
        request = self.request
        config_map = mounted_config_map(job_spec(request))
        if config_map is not None:
            labels = {
                keys.MANAGED_BY_LABEL: keys.MANAGED_BY,
                keys.PACKAGE_LABEL: request.package.name,
            }
            await blocking(
                self.executor,
                jobs.ensure_config_map,
                self.api,
                request.namespace,
                config_map,
                request.package.config_map,
                labels,
            )
