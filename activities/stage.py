"""Running one package stage on one node as a Job: mapping the request onto ``stagejob``'s spec,
the package ConfigMap, creating or adopting the Job, and reading its end as a ``StageReport``.

A retried activity adopts the Job its earlier attempt created (deterministic name, 409 = adopt), so
a worker crash never runs a stage twice. A Job that cannot pull its image fails the stage after a
bound instead of hanging (NodeWright #306); the Job is suspended, annotated with the verdict and
kept, like every failed Job, for inspection. A stage failure is a report, not an exception. It must
not decide what runs next (the node workflow does).
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwright import stagejob
from fleetwright.activities import status
from fleetwright.activities.payloads import NodePhase, StageOutcome, StageReport, StageRequest
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window
from fleetwright.api.nodeprofile import Package, PackageResources
from fleetwright.errors import NotFoundError, PermanentError, RetryableError
from fleetwright.kube import jobs, nodestatus, pods
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts
from fleetwright.kube.jobwatch import JobWatch, PodSucceeded
from fleetwright.kube.pods import PodFacts
from fleetwright.planner.interrupts import Interrupt, InterruptKind

# The agent's spelling of each interrupt (package-format §12.1); NONE never reaches a Job.
AGENT_INTERRUPT_TYPES = {
    InterruptKind.REBOOT: "node_restart",
    InterruptKind.RESTART_ALL_SERVICES: "restart_all_services",
    InterruptKind.SERVICE: "service_restart",
    InterruptKind.NOOP: "no_op",
}
IMAGE_PULL_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"})
OUTCOME_ANNOTATION = f"{stagejob.LABEL_PREFIX}/outcome"
MESSAGE_ANNOTATION = f"{stagejob.LABEL_PREFIX}/outcome-message"
# The node's condition reasons while a stage's image cannot be pulled, and once it was.
PULL_WAIT_REASON = "ImagePullWaiting"
PULLED_REASON = "ImagePulled"
# The node's boot id before a reboot interrupt's Job, kept on the Job: a retried attempt compares the
# boot id with the one from before the reboot, not with one it reads after.
BOOT_ID_ANNOTATION = f"{stagejob.LABEL_PREFIX}/boot-id-before"
CONFIG_VOLUME = "package-config"
CONFIG_MOUNT_DIR = "/skyhook-package/configmaps"


def encode_interrupt(interrupt: Interrupt) -> str:
    """Base64 JSON for the agent; ``services`` only for service restarts (an extra key crashes the
    v6 agent, §12.1)."""
    if interrupt.kind is InterruptKind.NONE:
        raise PermanentError("interrupt stage without an interrupt", reason="InvalidStageJob")
    doc: dict[str, Any] = {"type": AGENT_INTERRUPT_TYPES[interrupt.kind]}
    if interrupt.kind is InterruptKind.SERVICE:
        doc["services"] = list(interrupt.services)
    return base64.b64encode(json.dumps(doc).encode()).decode()


def config_map_name(profile: str, package: str, version: str) -> str:
    """``<cr>-<pkg>-<version>``, lower-cased (contract §3.2); characters a name cannot hold (semver
    build metadata's ``+``) become ``-``."""
    return re.sub(r"[^a-z0-9.-]", "-", f"{profile}-{package}-{version}".lower())[:253].strip("-.")


def _resources(resources: PackageResources | None) -> dict[str, Any] | None:
    if resources is None:
        return None
    requests = {"cpu": resources.cpu_request, "memory": resources.memory_request}
    limits = {"cpu": resources.cpu_limit, "memory": resources.memory_limit}
    out = {
        "requests": {k: v for k, v in requests.items() if v},
        "limits": {k: v for k, v in limits.items() if v},
    }
    return {k: v for k, v in out.items() if v} or None


def job_spec(request: StageRequest) -> stagejob.StageJobSpec:
    package: Package = request.package
    interrupt = request.interrupt if request.stage.is_interrupt else None
    if request.stage.is_interrupt and interrupt is None:
        raise PermanentError(f"stage {request.stage.value} needs an interrupt", reason="InvalidStageJob")
    return stagejob.StageJobSpec(
        profile=request.profile,
        profile_uid=request.profile_uid,
        generation=request.generation,
        node=request.node,
        package=package.name,
        version=package.version,
        image=package.image,
        digest=package.digest,
        stage=request.stage.value,
        agent_image=request.agent_image,
        host_root=request.host_root,
        interrupt_data=encode_interrupt(interrupt) if interrupt is not None else None,
        node_order=request.node_order,
        env=[e.to_k8s() for e in package.env],
        resources=_resources(package.resources),
        timeout_seconds=package.stage_timeout_seconds,
        tolerations=[t.to_k8s() for t in request.tolerations],
        namespace=request.namespace,
        extra_labels=dict(request.pod_labels),
    )


def job_name(spec: stagejob.StageJobSpec, attempt: int, pass_id: str = "") -> str:
    """Attempt 0 keeps stagejob's name for the pass; a later attempt hashes a distinct stage tag
    into a new one. Both stay the same for every activity retry of one request (adoption)."""
    if attempt == 0:
        return stagejob.job_name(spec, pass_id)
    return stagejob.job_name(replace(spec, stage=f"{spec.stage}-r{attempt}"), pass_id)


def _mount_config(manifest: dict[str, Any], config_map: str, keys: Sequence[str]) -> None:
    """One subPath mount per key into the copy container, so the package's own files in
    ``configmaps/`` stay visible (NodeWright #208); the copy puts them at ``${SKYHOOK_DIR}/configmaps``."""
    pod = manifest["spec"]["template"]["spec"]
    pod["volumes"].append({"name": CONFIG_VOLUME, "configMap": {"name": config_map}})
    copier = pod["initContainers"][0]
    copier["volumeMounts"] += [
        {"name": CONFIG_VOLUME, "mountPath": f"{CONFIG_MOUNT_DIR}/{key}", "subPath": key}
        for key in sorted(keys)
    ]


def manifest(request: StageRequest) -> dict[str, Any]:
    """The Job to create for ``request``: stagejob's rendering plus what the request adds."""
    spec = job_spec(request)
    try:
        rendered = copy.deepcopy(stagejob.render(spec))
    except stagejob.StageJobError as error:
        raise PermanentError(str(error), reason="InvalidStageJob") from error
    rendered["metadata"]["name"] = job_name(spec, request.attempt, request.pass_id)
    template = rendered["spec"]["template"]
    if request.pod_annotations:
        template["metadata"].setdefault("annotations", {}).update(request.pod_annotations)
    if request.backoff_limit is not None and not request.stage.is_interrupt:
        rendered["spec"]["backoffLimit"] = request.backoff_limit
    if request.package.config_map and not request.stage.is_interrupt:
        name = config_map_name(request.profile, request.package.name, request.package.version)
        _mount_config(rendered, name, list(request.package.config_map))
    return rendered


def _pull_failure(pods_of_job: Sequence[PodFacts], now: datetime, bound: timedelta) -> str | None:
    """A message when a pod of the Job has failed to pull an image for longer than ``bound``."""
    for pod in pods_of_job:
        stuck = [w for w in pod.waits if w.reason in IMAGE_PULL_REASONS]
        if stuck and pod.created is not None and now - pod.created >= bound:
            wait = stuck[0]
            return (
                f"pod {pod.name}: container {wait.container} cannot pull {wait.image or 'its image'} "
                f"for {int((now - pod.created).total_seconds())}s ({wait.reason}: {wait.message})"
            )
    return None


def _failure_details(pods_of_job: Sequence[PodFacts]) -> str:
    details = [
        f"pod {pod.name}: container {f.container} exited {f.exit_code}"
        + (f" ({f.reason}: {f.message})" if f.reason or f.message else "")
        for pod in pods_of_job
        for f in pod.failures
    ]
    return "; ".join(details[-3:])  # the latest attempts say most


def outcome(
    job: JobFacts,
    pods_of_job: Sequence[PodFacts],
    now: datetime,
    pull_bound: timedelta,
    pod_success: PodSucceeded | None = None,
) -> StageReport | None:
    """The stage's report once the Job has an outcome, else None (pure). The Job's pod exiting 0 is
    its success, before the Job controller's next sync marks the Job Complete."""
    base: dict[str, Any] = {"job": job.name, "started_at": job.started}
    if job.annotations.get(OUTCOME_ANNOTATION) == StageOutcome.IMAGE_PULL_FAILED.value:
        message = job.annotations.get(MESSAGE_ANNOTATION, "image pull failed")
        return StageReport(**base, outcome=StageOutcome.IMAGE_PULL_FAILED, message=message)
    if job.finished == "Complete":
        return StageReport(**base, outcome=StageOutcome.SUCCEEDED, finished_at=job.finished_at)
    if job.finished is None and pod_success is not None and pod_success.job_uid == job.uid:
        return StageReport(**base, outcome=StageOutcome.SUCCEEDED, finished_at=pod_success.at)
    if job.finished == "Failed":
        kind = StageOutcome.DEADLINE_EXCEEDED if job.reason == "DeadlineExceeded" else StageOutcome.FAILED
        message = "; ".join(m for m in (f"{job.reason}: {job.message}", _failure_details(pods_of_job)) if m)
        return StageReport(**base, outcome=kind, message=message, finished_at=job.finished_at)
    pull = _pull_failure(pods_of_job, now, pull_bound)
    if pull is not None:
        return StageReport(**base, outcome=StageOutcome.IMAGE_PULL_FAILED, message=pull, finished_at=now)
    return None


class StageRunner:
    """Runs one StageRequest to its report."""

    def __init__(
        self, api: ApiClient, executor: Executor, request: StageRequest, watch: JobWatch | None = None
    ) -> None:
        self.api, self.executor, self.request = api, executor, request
        self.watch = watch
        """The worker's shared watch of the namespace's Jobs; without it each wait reads the API."""
        self.shown: str | None = None
        """The pull wait this attempt made visible on the node, if any."""
        self.boot_id_before = ""
        """For a reboot wait (``request.reboot_timeout_seconds``): the boot id before the Job."""

    async def run(self) -> StageReport:
        rendered = manifest(self.request)
        await self._prerequisites()
        if self.request.pass_id:
            await self._earlier_pass_done(rendered)
        notes = rendered["metadata"]["annotations"]
        if self.request.reboot_timeout_seconds is not None:
            facts, _ = await blocking(self.executor, nodestatus.read_node, self.api, self.request.node)
            notes[BOOT_ID_ANNOTATION] = facts.boot_id
        job, created = await blocking(self.executor, jobs.create_or_adopt, self.api, rendered)
        # An adopted Job keeps the boot id its first attempt read (the node may have rebooted since).
        self.boot_id_before = job.annotations.get(BOOT_ID_ANNOTATION, notes.get(BOOT_ID_ANNOTATION, ""))
        clock = Clock()
        window = heartbeat_window()
        bound = timedelta(seconds=self.request.image_pull_timeout_seconds)
        quiet = False  # the last wait window passed with no change to the Job
        while True:
            try:
                job, version = await self._read(job)
            except NotFoundError:
                return StageReport(
                    job=job.name,
                    outcome=StageOutcome.FAILED,
                    message="the stage Job was deleted while running",
                )
            # A pod stuck pulling, or one whose Node was deleted, leaves the Job unchanged: look at
            # the pods and the Node once a window passed quietly, not on each of the Job's own
            # changes (most wake-ups; two reads fewer each). A running pod is never stuck pulling.
            stuck = job.finished is None and job.ready == 0 and quiet
            looked = job.finished == "Failed" or stuck
            listed = await self._pods(job) if looked else []
            if stuck:
                # A deleted Node never runs the pod: end with NodeGone now (the node left the fleet)
                # rather than wait out the Job's deadline and report a stage failure.
                await blocking(self.executor, nodestatus.read_node, self.api, self.request.node)
            success = self.watch.succeeded(job) if self.watch is not None else None
            report = outcome(job, listed, datetime.now(UTC), bound, success)
            if report is not None:
                if report.succeeded:
                    await self._show_pull_wait(None, bound)
                await self._settle(job, report)
                return report
            if looked or job.ready > 0:
                await self._show_pull_wait(_pull_wait(listed), bound)
            clock.beat(
                job=job.name, created=created, active=job.active, ready=job.ready, waiting=_waits(listed)
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

    async def _earlier_pass_done(self, rendered: dict[str, Any]) -> None:
        """Each pass names its own Jobs, so an earlier pass's Job of this stage may still run on the
        node (its workflow was terminated, or the node reset with --force): two executors must never
        share the host paths, so this stage waits (Temporal retries) until that Job has finished."""
        labels = rendered["metadata"]["labels"]
        prefix = stagejob.LABEL_PREFIX
        same = {
            f"{prefix}/{key}": labels[f"{prefix}/{key}"] for key in ("profile", "node", "stage", "package")
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
        await blocking(self.executor, jobs.ensure_namespace, self.api, request.namespace)
        if request.package.config_map and not request.stage.is_interrupt:
            name = config_map_name(request.profile, request.package.name, request.package.version)
            labels = {
                "app.kubernetes.io/managed-by": "fleetwright",
                f"{stagejob.LABEL_PREFIX}/package": request.package.name,
            }
            await blocking(
                self.executor,
                jobs.ensure_config_map,
                self.api,
                request.namespace,
                name,
                request.package.config_map,
                labels,
            )

    async def _show_pull_wait(self, wait: str | None, bound: timedelta) -> None:
        """A pull wait is a blocked wait: shown on the node as soon as it is seen (condition, label,
        Warning event), not only when its bound fails the stage; lifted when the image arrives."""
        if wait is not None and self.shown is None:
            message = f"{wait}; the stage fails if it lasts {int(bound.total_seconds())}s"
            await self._publish(NodePhase.BLOCKED, PULL_WAIT_REASON, message)
            self.shown = wait
        elif wait is None and self.shown is not None:
            await self._publish(NodePhase.IN_PROGRESS, PULLED_REASON, "the package image was pulled")
            self.shown = None

    async def _publish(self, phase: NodePhase, reason: str, message: str) -> None:
        await status.show(
            self.executor,
            self.api,
            profile=self.request.profile,
            node=self.request.node,
            phase=phase,
            reason=reason,
            message=message,
        )

    async def _settle(self, job: JobFacts, report: StageReport) -> None:
        """An image-pull verdict stops the Job's pod (no endless pulling on the node) and is written
        on the Job, so an adopting retry returns the same report."""
        if report.outcome is StageOutcome.IMAGE_PULL_FAILED and OUTCOME_ANNOTATION not in job.annotations:
            notes = {OUTCOME_ANNOTATION: report.outcome.value, MESSAGE_ANNOTATION: report.message[:1000]}
            await blocking(self.executor, jobs.suspend_with_note, self.api, job.namespace, job.name, notes)


def _pull_wait(pods_of_job: Sequence[PodFacts]) -> str | None:
    """What a pod of the Job waits for when it cannot pull an image (pure), else None."""
    for pod in pods_of_job:
        for wait in pod.waits:
            if wait.reason in IMAGE_PULL_REASONS:
                image = wait.image or "its image"
                return f"pod {pod.name}: container {wait.container} cannot pull {image} ({wait.reason})"
    return None


def _waits(listed: Sequence[PodFacts]) -> list[str]:
    return [f"{p.name}/{w.container}: {w.reason}" for p in listed for w in p.waits]
