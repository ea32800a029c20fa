"""Pods as the node activities see them: listing a node's pods (or a Job's) as small immutable facts,
deleting one, and waking up when they change.

It owns the translation of ``V1Pod`` into ``PodFacts`` (owner, mirror, tolerations, emptyDir,
container waits and failures) and of a ``LabelSelector`` into selector syntax. It must not decide
what to do with a pod (drain rules live in the activities).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.api.common import LabelSelector
from fleetwright.kube.errors import classified
from fleetwright.kube.watching import list_version, wait_for_change

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


@dataclass(frozen=True)
class ContainerWait:
    container: str
    reason: str
    message: str
    image: str = ""


@dataclass(frozen=True)
class ContainerFailure:
    container: str
    exit_code: int
    reason: str
    message: str


@dataclass(frozen=True)
class PodFacts:
    namespace: str
    name: str
    uid: str
    phase: str = "Pending"
    labels: Mapping[str, str] = field(default_factory=dict)
    controller_kind: str | None = None
    """Kind of the controlling owner reference (None: an unmanaged, bare pod)."""
    mirror: bool = False
    tolerates_unschedulable: bool = False
    uses_empty_dir: bool = False
    terminating: bool = False
    created: datetime | None = None
    waits: tuple[ContainerWait, ...] = ()
    failures: tuple[ContainerFailure, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _tolerates_unschedulable(tolerations: list[Any] | None) -> bool:
    for toleration in tolerations or []:
        exists = toleration.operator == "Exists"
        # An empty key with Exists tolerates every taint, the unschedulable one included.
        if exists and not toleration.key:
            return True
        if toleration.key == UNSCHEDULABLE_TAINT and toleration.effect in (None, "", "NoSchedule"):
            return True
    return False


def _statuses(pod: Any) -> list[Any]:
    status = pod.status
    if status is None:
        return []
    return [*(status.init_container_statuses or []), *(status.container_statuses or [])]


def _waits(pod: Any) -> tuple[ContainerWait, ...]:
    out = []
    for status in _statuses(pod):
        waiting = status.state.waiting if status.state else None
        if waiting is not None and waiting.reason:
            out.append(ContainerWait(status.name, waiting.reason, waiting.message or "", status.image or ""))
    return tuple(out)


def _failures(pod: Any) -> tuple[ContainerFailure, ...]:
    out = []
    for status in _statuses(pod):
        terminated = status.state.terminated if status.state else None
        if terminated is not None and terminated.exit_code:
            out.append(
                ContainerFailure(
                    status.name, int(terminated.exit_code), terminated.reason or "", terminated.message or ""
                )
            )
    return tuple(out)


def facts(pod: Any) -> PodFacts:
    """The facts the activities need from one ``V1Pod``."""
    meta, spec = pod.metadata, pod.spec
    controller = next((o for o in meta.owner_references or [] if o.controller), None)
    return PodFacts(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        phase=(pod.status.phase if pod.status else None) or "Pending",
        labels=dict(meta.labels or {}),
        controller_kind=controller.kind if controller else None,
        mirror=MIRROR_ANNOTATION in (meta.annotations or {}),
        tolerates_unschedulable=_tolerates_unschedulable(spec.tolerations),
        uses_empty_dir=any(v.empty_dir is not None for v in spec.volumes or []),
        terminating=meta.deletion_timestamp is not None,
        created=meta.creation_timestamp,
        waits=_waits(pod),
        failures=_failures(pod),
    )


def _json_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def json_facts(pod: Mapping[str, Any]) -> PodFacts:
    """A stage pod's facts from its JSON (a shared watch's): what a stage reads (phase, waits,
    failures, creation); not what a drain reads (owner kind, tolerations, volumes)."""
    meta = pod.get("metadata") or {}
    waits, failures = [], []
    for status in _json_statuses(pod):
        state = status.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        name = str(status.get("name") or "")
        if waiting.get("reason"):
            waits.append(
                ContainerWait(
                    name, waiting["reason"], waiting.get("message") or "", status.get("image") or ""
                )
            )
        if terminated.get("exitCode"):
            failures.append(
                ContainerFailure(
                    name,
                    int(terminated["exitCode"]),
                    terminated.get("reason") or "",
                    terminated.get("message") or "",
                )
            )
    created = meta.get("creationTimestamp")
    return PodFacts(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        phase=(pod.get("status") or {}).get("phase") or "Pending",
        terminating=meta.get("deletionTimestamp") is not None,
        created=datetime.fromisoformat(created) if created else None,
        waits=tuple(waits),
        failures=tuple(failures),
    )


def selector_string(selector: LabelSelector) -> str:
    """``selector`` in the apiserver's label-selector syntax (empty string: everything)."""
    parts = [f"{key}={value}" for key, value in sorted(selector.match_labels.items())]
    for requirement in selector.match_expressions:
        values = ",".join(requirement.values)
        parts.append(
            {
                "In": f"{requirement.key} in ({values})",
                "NotIn": f"{requirement.key} notin ({values})",
                "Exists": requirement.key,
                "DoesNotExist": f"!{requirement.key}",
            }[requirement.operator]
        )
    return ",".join(parts)


def _node_field(node: str) -> str:
    return f"spec.nodeName={node}"


def pods_on_node(api: client.ApiClient, node: str, *, label_selector: str = "") -> tuple[list[PodFacts], str]:
    """Every pod bound to ``node`` (all namespaces), and the list's resourceVersion to watch from."""
    with classified(f"list pods on node {node}"):
        listing = client.CoreV1Api(api).list_pod_for_all_namespaces(
            field_selector=_node_field(node), label_selector=label_selector
        )
    return [facts(p) for p in listing.items], list_version(listing)


def wait_for_node_pods(
    api: client.ApiClient, node: str, resource_version: str, seconds: float, *, label_selector: str = ""
) -> bool:
    """Block until a pod on ``node`` changes or ``seconds`` pass."""
    return wait_for_change(
        client.CoreV1Api(api).list_pod_for_all_namespaces,
        resource_version=resource_version,
        seconds=seconds,
        what=f"watch pods on node {node}",
        field_selector=_node_field(node),
        label_selector=label_selector,
    )


def job_pods(api: client.ApiClient, namespace: str, job: str) -> list[PodFacts]:
    with classified(f"list pods of job {namespace}/{job}"):
        listing = client.CoreV1Api(api).list_namespaced_pod(
            namespace, label_selector=f"{JOB_NAME_LABEL}={job}"
        )
    return [facts(p) for p in listing.items]


def delete_pod(api: client.ApiClient, namespace: str, name: str, *, grace_period_seconds: int | None) -> bool:
    """Delete a pod bypassing PodDisruptionBudgets (``disableEviction``); False when already gone."""
    with classified(f"delete pod {namespace}/{name}"):
        try:
            client.CoreV1Api(api).delete_namespaced_pod(
                name, namespace, grace_period_seconds=grace_period_seconds
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise
    return True
