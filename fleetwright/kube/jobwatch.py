"""One list + watch of a namespace's stage Jobs, shared by every stage wait of a worker.

Without it each running stage would list its Job after every change and hold a watch of its own:
most of the worker's API requests, each field-selected list scanning every Job of the namespace,
and a thread held for each wait's whole window. With it a wait is an asyncio event set by the
watch thread: no request, no thread.

It owns the cache (each Job's facts and resourceVersion), tombstones for deleted Jobs, and waking
the waits of the Job that changed. It must not decide what a Job's state means (the stage activity
does). A cache that has not (re)listed yet answers nothing, so callers read the API instead: a
broken watch costs requests, never a wrong answer.

A second watch, of the stage pods, tells when a Job's pod has succeeded: the Job controller marks
the Job Complete only at its next batched sync, about a second later (four seconds per node with
four stages). It also keeps the pods still pending or running, so a stage whose Job stayed quiet
looks for a pod stuck pulling its image without listing pods: a label-selected list scans every
kept stage pod of the namespace (several per node late in a rollout). A success is only
ever a positive fact (this Job's pod exited 0); not knowing it means waiting for the Job as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwright.api.keys import MANAGED_BY, MANAGED_BY_LABEL, NODE_LABEL
from fleetwright.eventwait import wait_event
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts, job_facts
from fleetwright.kube.listwatch import ListWatch, WatchEvent, start_thread
from fleetwright.kube.pods import JOB_NAME_LABEL, PodFacts, json_facts

# Every stage Job carries it (``fleetwright.stagejob``); nothing else of the namespace is cached.
STAGE_JOBS = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# The Jobs are indexed by their node: a stage's lookups are per node, not a scan of every Job of
# the fleet per stage.


def slim_job(job: dict[str, Any]) -> dict[str, Any]:
    """What ``job_facts`` reads of a Job: its metadata, status and suspension (not its template)."""
    meta = job.get("metadata") or {}
    return {
        "metadata": {k: v for k, v in meta.items() if k != "managedFields"},
        "spec": {"suspend": (job.get("spec") or {}).get("suspend")},
        "status": job.get("status") or {},
    }


@dataclass(frozen=True)
class PodSucceeded:
    """A stage Job's pod exited 0 (the Job controller has not necessarily said so yet)."""

    job: str
    job_uid: str
    at: datetime | None = None
    """When its last container finished."""


def pod_succeeded(pod: Mapping[str, Any]) -> PodSucceeded | None:
    """The success a stage pod's JSON shows, if it shows one (pure)."""
    status, owner = pod.get("status") or {}, _job_of(pod)
    if status.get("phase") != "Succeeded" or owner is None:
        return None
    ends = [str(end) for end in map(_finished_at, status.get("containerStatuses") or []) if end]
    return PodSucceeded(job=owner[0], job_uid=owner[1], at=_time(max(ends, default="")))


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What ``pod_succeeded`` and ``json_facts`` read of a stage pod (a relist of every kept pod
    stays small)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    return {
        "metadata": {
            **{
                k: meta.get(k) for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")
            },
            "labels": {JOB_NAME_LABEL: labels[JOB_NAME_LABEL]} if JOB_NAME_LABEL in labels else {},
            "ownerReferences": [
                {"kind": o.get("kind"), "uid": o.get("uid")} for o in meta.get("ownerReferences") or []
            ],
        },
        "status": {
            "phase": status.get("phase"),
            **{
                key: [_slim_container(c) for c in status.get(key) or []]
                for key in ("initContainerStatuses", "containerStatuses")
            },
        },
    }


def _slim_container(container: Mapping[str, Any]) -> dict[str, Any]:
    state = container.get("state") or {}
    waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
    return {
        "name": container.get("name"),
        "image": container.get("image"),
        "state": {
            "waiting": {k: waiting.get(k) for k in ("reason", "message")} if waiting else None,
            "terminated": {k: terminated.get(k) for k in ("finishedAt", "exitCode", "reason", "message")}
            if terminated
            else None,
        },
    }


def _job_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """The name and uid of the Job owning a stage pod, if a Job owns it."""
    meta = pod.get("metadata") or {}
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), None)
    job = (meta.get("labels") or {}).get(JOB_NAME_LABEL)
    return (str(job), str(owner.get("uid") or "")) if owner is not None and job else None


def _finished_at(container: Mapping[str, Any]) -> Any:
    return ((container.get("state") or {}).get("terminated") or {}).get("finishedAt")


def _time(value: str) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


class JobWatch:
    """The stage Jobs of one namespace, kept current by one watch thread; waits run on ``loop``."""

    def __init__(self, api: ApiClient, namespace: str, loop: asyncio.AbstractEventLoop) -> None:
        self.namespace, self._loop = namespace, loop
        self._lock = threading.Lock()
        self._jobs: dict[str, JobFacts] = {}
        self._by_node: dict[str, set[str]] = {}
        self._gone: set[str] = set()
        self._succeeded: dict[str, PodSucceeded] = {}  # by Job name
        # The pods still pending or running, by Job name, then pod name, with their Job's uid.
        self._unfinished: dict[str, dict[str, tuple[str, PodFacts]]] = {}
        self._pods_synced = False
        self._synced = False
        # Each wait with the number of the last change it had seen when it began: a wake-up the
        # loop runs late does not wake waits that began after the change (they read it already).
        self._waiters: dict[str, dict[asyncio.Event, int]] = {}  # touched on the loop only
        self._changes = 0
        self._stop = threading.Event()
        self._watch = ListWatch(
            api,
            "jobs",
            self.deliver,
            self._stop,
            namespace=namespace,
            label_selector=STAGE_JOBS,
            slim=slim_job,
            lost=self.lost,
        )
        # The stage pods carry their Job's labels, the managed-by one included.
        self._pods = ListWatch(
            api,
            "pods",
            self.deliver_pod,
            self._stop,
            namespace=namespace,
            label_selector=STAGE_JOBS,
            slim=slim_pod,
            lost=self.pods_lost,
        )

    def start(self) -> None:
        start_thread(self._watch)
        start_thread(self._pods)

    def stop(self) -> None:
        self._stop.set()

    @property
    def synced(self) -> bool:
        with self._lock:
            return self._synced

    def get(self, name: str) -> JobFacts | None:
        """The Job as last seen; None before the first list, or when the watch has not seen it."""
        with self._lock:
            return self._jobs.get(name) if self._synced else None

    def labelled(self, labels: Mapping[str, str]) -> list[JobFacts] | None:
        """The Jobs carrying every one of ``labels``; None before the first list."""
        with self._lock:
            if not self._synced:
                return None
            wanted = labels.items()
            node = labels.get(NODE_LABEL)
            names = self._by_node.get(node, set()) if node is not None else self._jobs.keys()
            candidates = (self._jobs[name] for name in names)
            return [job for job in candidates if wanted <= job.labels.items()]

    def succeeded(self, job: JobFacts) -> PodSucceeded | None:
        """This very Job's pod has succeeded (seen on the pod watch), else None."""
        with self._lock:
            seen = self._succeeded.get(job.name)
        return seen if seen is not None and seen.job_uid == job.uid else None

    def pods_of(self, job: JobFacts) -> list[PodFacts] | None:
        """This very Job's pods still pending or running; None before the pod watch has listed."""
        with self._lock:
            if not self._pods_synced:
                return None
            return [facts for uid, facts in self._unfinished.get(job.name, {}).values() if uid == job.uid]

    def gone(self, name: str) -> bool:
        """True when the watch saw the Job deleted."""
        with self._lock:
            return name in self._gone

    async def wait(self, name: str, version: str, seconds: float, uid: str = "") -> bool:
        """Block until the Job is no longer at ``version`` (changed or deleted) or its pod succeeded,
        the watch relisted or failed, or ``seconds`` pass. True when the caller should read the Job
        again, False when the window passed quietly. ``uid``: the Job's, whose pod's success counts."""
        moved, seen = self._moved(name, version, uid)
        if moved:
            return True
        event = asyncio.Event()
        self._waiters.setdefault(name, {})[event] = seen
        try:
            return await wait_event(event, seconds) or self._moved(name, version, uid)[0]
        finally:
            waiting = self._waiters.get(name)
            if waiting is not None:
                waiting.pop(event, None)
                if not waiting:
                    del self._waiters[name]

    def deliver(self, event: WatchEvent) -> None:
        """The watch thread's callback: update the cache, then wake the waits it concerns."""
        if event.type == "SYNC":
            fresh = {facts.name: facts for facts in map(job_facts, event.items)}
            by_node: dict[str, set[str]] = {}
            for facts in fresh.values():
                by_node.setdefault(facts.labels.get(NODE_LABEL, ""), set()).add(facts.name)
            with self._lock:
                self._gone = (self._gone | set(self._jobs)) - set(fresh)
                self._jobs, self._by_node, self._synced = fresh, by_node, True
                change = self._count()
            self._wake(None, change)
            return
        facts = job_facts(event.obj or {})
        with self._lock:
            node = facts.labels.get(NODE_LABEL, "")
            if event.type == "DELETED":
                self._jobs.pop(facts.name, None)
                self._by_node.get(node, set()).discard(facts.name)
                self._gone.add(facts.name)
            else:
                self._jobs[facts.name] = facts
                self._by_node.setdefault(node, set()).add(facts.name)
                self._gone.discard(facts.name)
            change = self._count()
        self._wake(facts.name, change)

    def deliver_pod(self, event: WatchEvent) -> None:
        """The pod watch thread's callback: note a success, keep an unfinished pod's facts, then
        wake its Job's waits on a success."""
        if event.type == "SYNC":
            found = (pod_succeeded(pod) for pod in event.items)
            unfinished: dict[str, dict[str, tuple[str, PodFacts]]] = {}
            for pod in event.items:
                _keep_unfinished(unfinished, pod)
            with self._lock:
                self._succeeded = {s.job: s for s in found if s is not None}
                self._unfinished, self._pods_synced = unfinished, True
                change = self._count()
            self._wake(None, change)
            return
        pod = event.obj or {}
        success = pod_succeeded(pod) if event.type != "DELETED" else None
        with self._lock:
            _forget(self._unfinished, pod)
            if event.type != "DELETED":
                _keep_unfinished(self._unfinished, pod)
            if success is None:
                return  # a pod starting, running or failing: the Job says what that means
            self._succeeded[success.job] = success
            change = self._count()
        self._wake(success.job, change)

    def pods_lost(self) -> None:
        """The pod watch failed: its unfinished pods are unknown until it has listed again."""
        with self._lock:
            self._pods_synced = False

    def lost(self) -> None:
        """The watch failed: answer nothing until it has listed again (callers read the API)."""
        with self._lock:
            self._synced = False
            change = self._count()
        self._wake(None, change)

    def _moved(self, name: str, version: str, uid: str) -> tuple[bool, int]:
        """Whether the Job is no longer at ``version``, and the number of the last change seen."""
        with self._lock:
            seen = self._jobs.get(name)
            moved = name in self._gone or (seen is not None and seen.version != version)
            # A caller that waits has not seen the success (it would have returned).
            success = self._succeeded.get(name)
            moved = moved or (success is not None and bool(uid) and success.job_uid == uid)
            return moved, self._changes

    def _count(self) -> int:
        self._changes += 1  # under the lock
        return self._changes

    def _wake(self, name: str | None, change: int) -> None:
        """Wake ``name``'s waits (every wait after a relist or a failure) on the loop's thread."""
        # A worker shutting down closes its loop; the watch thread's last events wake nobody.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._set, name, change)

    def _set(self, name: str | None, change: int) -> None:
        groups = list(self._waiters.values()) if name is None else [self._waiters.get(name, {})]
        for event in [e for group in groups for e, seen in group.items() if seen < change]:
            event.set()


def _keep_unfinished(unfinished: dict[str, dict[str, tuple[str, PodFacts]]], pod: Mapping[str, Any]) -> None:
    owner = _job_of(pod)
    if owner is not None and (pod.get("status") or {}).get("phase") in (None, "Pending", "Running"):
        facts = json_facts(pod)
        unfinished.setdefault(owner[0], {})[facts.name] = (owner[1], facts)


def _forget(unfinished: dict[str, dict[str, tuple[str, PodFacts]]], pod: Mapping[str, Any]) -> None:
    owner = _job_of(pod)
    if owner is None or owner[0] not in unfinished:
        return
    pods = unfinished[owner[0]]
    pods.pop(str((pod.get("metadata") or {}).get("name")), None)
    if not pods:
        del unfinished[owner[0]]


class JobWatches:
    """A worker's shared Job watches, one per namespace, started on first use and stopped together."""

    def __init__(self, api: ApiClient) -> None:
        self._api = api
        self._watches: dict[str, JobWatch] = {}

    def of(self, namespace: str) -> JobWatch:
        """The namespace's watch (call on the worker's event loop)."""
        watch = self._watches.get(namespace)
        if watch is None:
            watch = self._watches[namespace] = JobWatch(self._api, namespace, asyncio.get_running_loop())
            watch.start()
        return watch

    def stop(self) -> None:
        for watch in self._watches.values():
            watch.stop()

    def __enter__(self) -> JobWatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
