"""Stage Jobs and what they need: the package namespace, the package ConfigMap, creating a Job or
adopting the one a previous attempt created, reading its state and waking up when it changes.

It owns idempotence at the API level (409 AlreadyExists means adopt; a ConfigMap is replaced only
when its data differs), and saves the writes a fleet would repeat: a namespace or ConfigMap this
client ensured recently is not written again (every stage of every node needs the same ones).
It must not render Job manifests (``fleetwright.stagejob`` does) nor decide what a Job's state
means for the rollout (the activities do). It never deletes a Job: failed Jobs stay for their logs.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.errors import NotFoundError
from fleetwright.kube import inventory
from fleetwright.kube.client import fetch_json
from fleetwright.kube.errors import classified
from fleetwright.kube.watching import wait_for_change

HTTP_CONFLICT = 409
# How long an ensured namespace or ConfigMap is trusted without a write. Short enough that one
# deleted by hand is recreated within a few minutes (the stage pod waits for its volume meanwhile).
ENSURED_SECONDS = 300.0


class _Ensured:
    """What one API client ensured, and when (per client, so separate identities never share)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: dict[tuple[str, ...], float] = {}

    def fresh(self, key: tuple[str, ...]) -> bool:
        with self._lock:
            at = self._at.get(key)
        return at is not None and time.monotonic() - at < ENSURED_SECONDS

    def mark(self, key: tuple[str, ...]) -> None:
        with self._lock:
            self._at[key] = time.monotonic()


_ensured: weakref.WeakKeyDictionary[client.ApiClient, _Ensured] = weakref.WeakKeyDictionary()
_ensured_lock = threading.Lock()


def _ensured_by(api: client.ApiClient) -> _Ensured:
    with _ensured_lock:
        return _ensured.setdefault(api, _Ensured())


@dataclass(frozen=True)
class JobFacts:
    namespace: str
    name: str
    finished: str | None = None
    """``Complete`` or ``Failed`` once the Job reached a terminal condition."""
    reason: str = ""
    message: str = ""
    started: datetime | None = None
    finished_at: datetime | None = None
    active: int = 0
    ready: int = 0
    suspended: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    version: str = ""
    """The Job's own resourceVersion: a shared watch's copy differs from it once the Job changed."""
    uid: str = ""
    created: datetime | None = None


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def job_facts(job: Mapping[str, Any]) -> JobFacts:
    """The facts of a Job as the API sends it (JSON dicts; pure)."""
    meta, status = job.get("metadata") or {}, job.get("status") or {}
    terminal = next(
        (
            c
            for c in status.get("conditions") or []
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        ),
        None,
    )
    return JobFacts(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        finished=terminal["type"] if terminal else None,
        reason=(terminal.get("reason") or "") if terminal else "",
        message=(terminal.get("message") or "") if terminal else "",
        started=_time(status.get("startTime")),
        finished_at=_time(status.get("completionTime"))
        or (_time(terminal.get("lastTransitionTime")) if terminal else None),
        active=int(status.get("active") or 0),
        ready=int(status.get("ready") or 0),
        suspended=bool((job.get("spec") or {}).get("suspend")),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        version=str(meta.get("resourceVersion") or ""),
        uid=str(meta.get("uid") or ""),
        created=_time(meta.get("creationTimestamp")),
    )


def ensure_config_map(
    api: client.ApiClient, namespace: str, name: str, data: Mapping[str, str], labels: Mapping[str, str]
) -> None:
    """Create the ConfigMap, or bring an existing one's data up to ``data`` (a config change keeps
    the name ``<cr>-<pkg>-<version>``); no write when it already matches."""
    digest = hashlib.sha256(json.dumps(dict(data), sort_keys=True).encode()).hexdigest()
    ensured, key = _ensured_by(api), ("configmap", namespace, name, digest)
    if ensured.fresh(key):
        return
    _write_config_map(client.CoreV1Api(api), namespace, name, data, labels)
    ensured.mark(key)


def _write_config_map(
    core: client.CoreV1Api, namespace: str, name: str, data: Mapping[str, str], labels: Mapping[str, str]
) -> None:
    metadata = client.V1ObjectMeta(name=name, namespace=namespace, labels=dict(labels))
    body = client.V1ConfigMap(metadata=metadata, data=dict(data))
    with classified(f"create configmap {namespace}/{name}"):
        try:
            core.create_namespaced_config_map(namespace, body)
            return
        except ApiException as error:
            if error.status != HTTP_CONFLICT:
                raise
    with classified(f"read configmap {namespace}/{name}"):
        current = core.read_namespaced_config_map(name, namespace)
    if dict(current.data or {}) == dict(data):
        return
    # Replace (not patch) so removed keys go too; the resourceVersion turns a race into a 409.
    metadata.resource_version = current.metadata.resource_version if current.metadata else None
    with classified(f"replace configmap {namespace}/{name}"):
        core.replace_namespaced_config_map(name, namespace, body)


def create_or_adopt(api: client.ApiClient, manifest: Mapping[str, Any]) -> tuple[JobFacts, bool]:
    """Create the Job; when it exists (a retried activity), adopt it. Returns (job, created)."""
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    with classified(f"create job {namespace}/{name}"):
        try:
            # The manifest goes as it is: the apiserver validates it, and client models cost CPU.
            created = fetch_json(client.BatchV1Api(api).create_namespaced_job, namespace, dict(manifest))
            return job_facts(created), True
        except ApiException as error:
            if error.status != HTTP_CONFLICT:
                raise
    facts, _ = read_job(api, namespace, name)
    return facts, False


def read_job(api: client.ApiClient, namespace: str, name: str) -> tuple[JobFacts, str]:
    """The Job's facts and the resourceVersion to watch it from."""
    with classified(f"list job {namespace}/{name}"):
        listing = fetch_json(
            client.BatchV1Api(api).list_namespaced_job, namespace, field_selector=f"metadata.name={name}"
        )
    items = listing.get("items") or []
    if not items:
        raise NotFoundError(f"job {namespace}/{name} does not exist")
    return job_facts(items[0]), str((listing.get("metadata") or {}).get("resourceVersion") or "")


def labelled_jobs(api: client.ApiClient, namespace: str, labels: Mapping[str, str]) -> list[JobFacts]:
    """The namespace's Jobs carrying every one of ``labels``."""
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    items = inventory.list_items(
        api, "jobs", namespace=namespace, label_selector=selector, timeout_seconds=None
    )
    return [job_facts(item) for item in items]


def wait_for_job(
    api: client.ApiClient, namespace: str, name: str, resource_version: str, seconds: float
) -> bool:
    """Block until the Job changes or ``seconds`` pass."""
    return wait_for_change(
        client.BatchV1Api(api).list_namespaced_job,
        namespace,
        resource_version=resource_version,
        seconds=seconds,
        what=f"watch job {namespace}/{name}",
        field_selector=f"metadata.name={name}",
    )


def suspend_with_note(
    api: client.ApiClient, namespace: str, name: str, annotations: Mapping[str, str]
) -> None:
    """Suspend the Job (its pods go, the Job stays for inspection) and record why on it, so an
    adopting retry reads the same verdict instead of waiting again."""
    patch = {"metadata": {"annotations": dict(annotations)}, "spec": {"suspend": True}}
    with classified(f"suspend job {namespace}/{name}"):
        client.BatchV1Api(api).patch_namespaced_job(
            name, namespace, patch, _content_type="application/merge-patch+json"
        )
