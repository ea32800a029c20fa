"""Finding the stage Jobs fleetwright ran on a node, reading their pods' logs (the operator CLI's
``logs`` and ``history``), and deleting a node's finished ones (``node reset``: a stage Job's name
is deterministic, so a kept Job would be adopted as already done instead of running again).

It owns the label selection (``fleetwright.io/profile``, ``fleetwright.io/node`` and optionally
``fleetwright.io/stage`` as ``fleetwright.stagejob`` writes them) and the container order a stage
pod runs in (init containers first). It must not decide which Job a human means; the CLI does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.api import keys
from fleetwright.kube.errors import classified
from fleetwright.kube.jobs import JobFacts, labelled_jobs
from fleetwright.kube.pods import JOB_NAME_LABEL

HTTP_NOT_FOUND = 404


@dataclass(frozen=True)
class StageJobFacts:
    namespace: str
    name: str
    profile: str
    node: str
    package: str
    stage: str
    created: datetime | None
    finished: str | None
    """``Complete`` or ``Failed`` once terminal, else None."""
    finished_at: datetime | None = None
    active: int = 0


@dataclass(frozen=True)
class StagePod:
    namespace: str
    name: str
    phase: str
    containers: tuple[str, ...]
    """In the order they run: init containers, then the pod's containers."""
    created: datetime | None = None
    never_started: dict[str, str] = field(default_factory=dict)
    """Containers that never ran, by the reason they wait (the kubelet has no log of them: after
    a failed stage step, the check and the main container never start)."""


def _labels(profile: str | None, node: str | None, stage: str | None) -> dict[str, str]:
    wanted = {keys.PROFILE_LABEL: profile, keys.NODE_LABEL: node, keys.STAGE_LABEL: stage}
    labels = {key: value for key, value in wanted.items() if value}
    return labels or {keys.MANAGED_BY_LABEL: keys.MANAGED_BY}


def stage_jobs(
    api: client.ApiClient,
    namespace: str,
    profile: str | None,
    node: str | None = None,
    stage: str | None = None,
) -> list[StageJobFacts]:
    """The stage Jobs of ``profile`` (of every profile when None; on ``node``, of ``stage`` when
    given), oldest first."""
    listed = labelled_jobs(api, namespace, _labels(profile, node, stage))
    out = [_job(job) for job in listed]
    return sorted(out, key=lambda j: (j.created is None, j.created or datetime.min, j.name))


def _job(job: JobFacts) -> StageJobFacts:
    labels = job.labels
    return StageJobFacts(
        namespace=job.namespace,
        name=job.name,
        profile=labels.get(keys.PROFILE_LABEL, ""),
        node=labels.get(keys.NODE_LABEL, ""),
        package=labels.get(keys.PACKAGE_LABEL, ""),
        stage=labels.get(keys.STAGE_LABEL, ""),
        created=job.created,
        finished=job.finished,
        finished_at=job.finished_at,
        active=job.active,
    )


def _never_started(status: Any) -> dict[str, str]:
    out = {}
    for container in [*(status.init_container_statuses or []), *(status.container_statuses or [])]:
        waiting = container.state.waiting if container.state else None
        ran_before = container.last_state and container.last_state.terminated
        if waiting is not None and not ran_before:
            out[container.name] = waiting.reason or "Waiting"
    return out


def _pod(pod: Any) -> StagePod:
    spec = pod.spec
    return StagePod(
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        phase=(pod.status.phase if pod.status else None) or "Pending",
        containers=tuple(c.name for c in [*(spec.init_containers or []), *(spec.containers or [])]),
        created=pod.metadata.creation_timestamp,
        never_started=_never_started(pod.status) if pod.status else {},
    )


def job_pods(api: client.ApiClient, namespace: str, job: str) -> list[StagePod]:
    """The Job's pods with their containers in run order, oldest first."""
    with classified(f"list pods of job {namespace}/{job}"):
        listing = client.CoreV1Api(api).list_namespaced_pod(
            namespace, label_selector=f"{JOB_NAME_LABEL}={job}"
        )
    pods = [_pod(p) for p in listing.items]
    return sorted(pods, key=lambda p: (p.created is None, p.created or datetime.min, p.name))


def container_log(api: client.ApiClient, namespace: str, pod: str, container: str) -> str:
    """One container's log as the kubelet serves it (through the apiserver's pods/log proxy)."""
    with classified(f"read log of {namespace}/{pod} container {container}"):
        text: str = client.CoreV1Api(api).read_namespaced_pod_log(pod, namespace, container=container)
    return text


def delete_job(api: client.ApiClient, namespace: str, name: str) -> bool:
    """Delete a Job and (in the background) its pods; False when it was already gone."""
    with classified(f"delete job {namespace}/{name}"):
        try:
            client.BatchV1Api(api).delete_namespaced_job(name, namespace, propagation_policy="Background")
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return False
            raise
    return True
