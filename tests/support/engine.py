"""Harness for engine integration tests: an in-process worker with the real activities against
the local control plane and the Temporal dev server, a simulated kubelet that "reboots" a node
when an interrupt Job runs on it, samplers that watch invariants while a rollout runs, the order of a
profile's stage Jobs, and the decisions a rollout's history recorded."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from fleetwright.activities.health import health_activities
from fleetwright.activities.node import all_activities
from fleetwright.activities.payloads import NAMES, DecideReport
from fleetwright.activities.rollout import rollout_activities
from fleetwright.api.keys import PROFILE_LABEL, cordon_key
from fleetwright.kube import inventory
from fleetwright.kube.client import from_kubeconfig
from fleetwright.kube.jobwatch import JobWatches
from fleetwright.kube.listwatch import ListWatch, WatchEvent, start_thread
from fleetwright.local.kubelet import SimulatedKubelet, watched_kubelet
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.local.ticker import Ticker
from fleetwright.prometheus import PrometheusAccess
from fleetwright.registry import RegistryAccess
from fleetwright.stagejob.render import PACKAGE_NAMESPACE
from fleetwright.worker.temporalworker import build_worker
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import wait_for

FAST_PODS = stage_pod_timing(0.3, ready_seconds=0.1)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@contextlib.asynccontextmanager
async def engine_worker(
    cluster: ClusterUnderTest,
    client: Client,
    prefix: str = "engine",
    *,
    prometheus_url: str = "",
    queue: str | None = None,
    registry: RegistryAccess | None = None,
) -> AsyncIterator[str]:
    """An in-process worker with the real activities on a task queue of its own (``queue``, to
    take over another worker's); yields the queue. Stage waits share one Job watch, as in the
    worker process. Health checks query ``prometheus_url``; image pinning reaches the registries
    with ``registry``."""
    api = from_kubeconfig(cluster.kubeconfig)
    queue = queue or unique(prefix)
    access = PrometheusAccess(url=prometheus_url, timeout_seconds=QUERY_TIMEOUT_SECONDS)
    with JobWatches(api) as job_watches:
        health = health_activities(api, access)
        rollout = rollout_activities(api, prometheus=access, registry=registry)
        activities = [*all_activities(api, job_watches=job_watches), *rollout, *health]
        async with build_worker(client, activities, task_queue=queue):
            yield queue


QUERY_TIMEOUT_SECONDS = 5
"""The Prometheus query timeout of ``engine_worker``'s health activities."""


def simulated_kubelet(cluster: ClusterUnderTest) -> contextlib.AbstractContextManager[SimulatedKubelet]:
    """The simulated kubelet on a watch of the interrupt pods: a poll makes no request. Stage pods
    are kept, so a kubectl list per poll would read every interrupt pod the session made."""
    return watched_kubelet(cluster.kubeconfig, cluster.kubectl)


def kubectl_json(cluster: ClusterUnderTest, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def running_on(cluster: ClusterUnderTest, namespace: str) -> dict[str, str]:
    """pod name -> node, for the namespace's Running pods not being deleted."""
    pods = kubectl_json(cluster, "pods", "-n", namespace)["items"]
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


def label_nodes(cluster: ClusterUnderTest, nodes: list[str], label: str) -> None:
    cluster.kubectl("label", "node", *nodes, label, "--overwrite")


@dataclass
class Sampler:
    """Polls the cluster on a thread and records the worst value ``measure`` returned."""

    measure: Callable[[], int]
    interval: float = 0.3
    worst: int = 0
    samples: int = 0
    _ticker: Ticker | None = None

    def __enter__(self) -> Sampler:
        self._ticker = Ticker(self._sample, self.interval, name="sampler").__enter__()
        return self

    def __exit__(self, *_: object) -> None:
        if self._ticker is not None:
            self._ticker.__exit__(None, None, None)

    def _sample(self) -> None:
        try:
            value = self.measure()
        except Exception:
            value = 0
        self.worst = max(self.worst, value)
        self.samples += 1


def cordoned_by(cluster: ClusterUnderTest, profile: str, selector: str) -> Callable[[], int]:
    """How many of the nodes ``selector`` picks the profile's rollout has cordoned now (read on a
    client of its own: a sampler asks every few tenths of a second)."""
    api, key = from_kubeconfig(cluster.kubeconfig), cordon_key(profile)

    def count() -> int:
        nodes = inventory.list_items(api, "nodes", label_selector=selector)
        return sum(
            1 for n in nodes if n["spec"].get("unschedulable") and key in n["metadata"].get("annotations", {})
        )

    return count


async def decisions(client: Client, handle: WorkflowHandle[Any, Any]) -> list[DecideReport]:
    """Every observe-and-decide result in a rollout's history, oldest first."""
    asked: set[int] = set()
    reports: list[DecideReport] = []
    converter = client.data_converter.payload_converter
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == NAMES.OBSERVE_AND_DECIDE:
                asked.add(event.event_id)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attributes = event.activity_task_completed_event_attributes
            if attributes.scheduled_event_id in asked:
                (report,) = converter.from_payloads(attributes.result.payloads, [DecideReport])
                reports.append(report)
    return reports


class JobCreations:
    """The order in which the apiserver created a profile's stage Jobs, from a watch's events: a
    creation timestamp has whole seconds, and a node's fast stages are created within one."""

    def __init__(self, cluster: ClusterUnderTest, profile: str) -> None:
        self.names: list[str] = []
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._watch = ListWatch(
            from_kubeconfig(cluster.kubeconfig),
            "jobs",
            self._deliver,
            self._stop,
            namespace=PACKAGE_NAMESPACE,
            label_selector=f"{PROFILE_LABEL}={profile}",
            window_seconds=5,
        )

    def __enter__(self) -> JobCreations:
        start_thread(self._watch)
        # Listed before the test creates any Job: a Job first seen in the list has no known order.
        wait_for(self._listed.is_set, what="the stage Job watch's first list")
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def _deliver(self, event: WatchEvent) -> None:
        self._listed.set()
        if event.type == "SYNC":
            seen = list(event.items)
        elif event.type == "ADDED" and event.obj is not None:
            seen = [event.obj]
        else:
            return
        for job in seen:
            name = job["metadata"]["name"]
            if name not in self.names:
                self.names.append(name)

    def ordered(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``jobs`` in the order they were created (each must have been seen)."""
        return sorted(jobs, key=lambda job: self.names.index(job["metadata"]["name"]))
