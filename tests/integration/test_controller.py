"""The controller end to end: `kubectl apply` of NodeProfiles and DeploymentPolicies drives real
rollouts (in-process worker with the real activities, kwok nodes, the Temporal dev server), and
the CR status, conditions and Events mirror them; pausing, editing and restarting the controller."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.client import Client

from fleetwright.activities.node import all_activities
from fleetwright.activities.rollout import RolloutActivities
from fleetwright.kube.client import from_kubeconfig
from fleetwright.localcluster import examples
from fleetwright.localcluster.kubelet import SimulatedKubelet
from fleetwright.localcluster.temporal import LocalTemporal
from fleetwright.planner.fleet import cordon_key
from fleetwright.planner.nodestate import read_profile_state
from fleetwright.worker.controller import ControllerOptions, run_controller
from fleetwright.worker.settings import WorkerSettings
from fleetwright.worker.temporal import build_worker
from fleetwright.workflows.payloads import EngineSettings
from fleetwright.workflows.rollout import rollout_workflow_id
from tests.support.engine import FAST_PODS, kubectl_json, label_nodes, unique
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
GROUP_LABEL = "test.fleetwright.io/group"
OPTIONS = ControllerOptions(status_interval_seconds=1.0, watch_window_seconds=5, refresh_delay_seconds=0.3)


@pytest.fixture(scope="module")
def crds(cluster: ClusterUnderTest) -> None:
    """Installed idempotently and left in place (the admission module manages its own copy)."""
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "crd/nodeprofiles.fleetwright.io",
        "crd/deploymentpolicies.fleetwright.io",
        "--timeout=60s",
    )


def engine_settings() -> EngineSettings:
    return EngineSettings(
        observe_interval_seconds=2,
        stage_pod_annotations=FAST_PODS,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        reboot_timeout_seconds=120,
    )


@pytest.fixture
async def worker(cluster: ClusterUnderTest, temporal_client: Client) -> AsyncIterator[str]:
    """An in-process worker with the real activities on its own task queue; yields the queue."""
    api = from_kubeconfig(cluster.kubeconfig)
    queue = unique("ctl")
    activities = [*all_activities(api), RolloutActivities(api).observe_and_decide]
    async with build_worker(temporal_client, activities, task_queue=queue):
        yield queue


@dataclass
class RunningController:
    """The controller in-process, startable and stoppable like a pod being killed and rescheduled."""

    settings: WorkerSettings
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.stop_event = asyncio.Event()
        self.task = asyncio.create_task(run_controller(self.settings, self.stop_event, OPTIONS))

    async def stop(self) -> None:
        self.stop_event.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, timeout=10)
            self.task = None


@pytest.fixture
async def controller(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, worker: str, crds: None
) -> AsyncIterator[RunningController]:
    settings = WorkerSettings(
        temporal_address=temporal_server.address,
        temporal_namespace=temporal_server.namespace,
        task_queue=worker,
        kubeconfig=cluster.kubeconfig,
        engine=engine_settings(),
    )
    running = RunningController(settings)
    running.start()
    try:
        yield running
    finally:
        await running.stop()


@dataclass
class Rollout:
    """One profile + policy under test, on its own group of nodes."""

    cluster: ClusterUnderTest
    name: str
    group: str
    nodes: list[str]
    policy: dict[str, Any]

    def apply(self, *, version: str = "1.0.0", annotations: dict[str, str] | None = None) -> None:
        profile = examples.profile(
            self.name, version=version, selector={GROUP_LABEL: self.group}, policy=self.name
        )
        body = _manifest(profile.model_dump(mode="json", by_alias=True, exclude_none=True))
        body["metadata"] = {"name": self.name, "annotations": annotations or {}}
        policy = _manifest(
            examples.policy(self.name, **self.policy).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        )
        policy["metadata"] = {"name": self.name}
        items = {"apiVersion": "v1", "kind": "List", "items": [policy, body]}
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(items))

    def get(self) -> dict[str, Any]:
        obj: dict[str, Any] = kubectl_json(self.cluster, "nodeprofile", self.name)
        return obj

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.get().get("status") or {}
        return status

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status().get("conditions", []) if c["type"] == type_), None)

    def wait_ready(self, timeout: int = 80) -> None:
        self.cluster.kubectl(
            "wait",
            "--for=condition=Ready",
            f"nodeprofile/{self.name}",
            f"--timeout={timeout}s",
            timeout=timeout + 10,
        )

    def event_reasons(self) -> list[str]:
        events = kubectl_json(self.cluster, "events.events.k8s.io", "-n", "default")["items"]
        return [e["reason"] for e in events if (e.get("regarding") or {}).get("name") == self.name]

    def cordoned(self) -> list[str]:
        key = cordon_key(self.name)
        nodes = kubectl_json(self.cluster, "nodes", "-l", f"{GROUP_LABEL}={self.group}")["items"]
        return [
            n["metadata"]["name"]
            for n in nodes
            if n["spec"].get("unschedulable") and key in (n["metadata"].get("annotations") or {})
        ]

    def recorded_versions(self) -> set[str | None]:
        nodes = kubectl_json(self.cluster, "nodes", "-l", f"{GROUP_LABEL}={self.group}")["items"]
        records = [read_profile_state(n["metadata"].get("annotations", {}), self.name) for n in nodes]
        return {(r.packages["tuning"].version if "tuning" in r.packages else None) for r in records}

    def delete(self) -> None:
        self.cluster.kubectl(
            "delete", "nodeprofile,deploymentpolicy", self.name, "--ignore-not-found", check=False
        )


def _manifest(dumped: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dumped.items() if k != "status"}


@pytest.fixture
async def rollout(cluster: ClusterUnderTest, temporal_client: Client) -> AsyncIterator[Rollout]:
    name = unique("ctl")
    nodes = await asyncio.to_thread(cluster.add_nodes, 3)
    await asyncio.to_thread(label_nodes, cluster, nodes, f"{GROUP_LABEL}={name}")
    policy = {
        "max_unavailable": 2,
        "steps": [
            {"name": "canary", "canary": {"count": 1}},
            {"name": "watch", "soak": {"durationSeconds": 3}},
            {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
        ],
    }
    created = Rollout(cluster, name, name, nodes, policy)
    with SimulatedKubelet(cluster.kubectl):
        yield created
    await asyncio.to_thread(created.delete)
    handle = temporal_client.get_workflow_handle(rollout_workflow_id(name))
    with contextlib.suppress(Exception):  # already finished after the deletion's abort
        await handle.terminate("test done")


async def until(
    predicate: Any, within: float, what: str, interval: float = 0.2, details: Any = lambda: ""
) -> Any:
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        last = await asyncio.to_thread(predicate)
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {within}s waiting for {what} (last: {last}; {details()})")


def first_cordon_latency(cluster: ClusterUnderTest, rollout: Rollout, timeout: float = 30) -> float:
    """Apply the rollout and poll the API (no kubectl process per sample) until one of its nodes
    is cordoned by the profile; seconds from the apply's return."""
    core = k8s.CoreV1Api(from_kubeconfig(cluster.kubeconfig))
    key = cordon_key(rollout.name)
    rollout.apply()
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for node in core.list_node(label_selector=f"{GROUP_LABEL}={rollout.group}").items:
            if (
                node.spec
                and node.spec.unschedulable
                and key in ((node.metadata and node.metadata.annotations) or {})
            ):
                return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError("no node was cordoned")


async def test_apply_starts_the_rollout_and_kubectl_wait_ready_returns_when_done(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    latency = await asyncio.to_thread(first_cordon_latency, cluster, rollout)
    print(f"apply -> first cordon: {latency:.2f}s")
    assert latency < 5, latency
    await asyncio.to_thread(rollout.wait_ready)
    status = await asyncio.to_thread(rollout.status)
    assert status["phase"] == "Complete"
    assert status["observedGeneration"] == 1
    assert status["progress"] == "3/3"
    assert status["nodesComplete"] == 3
    assert status["nodesFailed"] == 0
    assert status["workflowId"] == f"nodeprofile/{rollout.name}"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["reason"] == "RolloutComplete"
    assert conditions["Progressing"]["status"] == "False"
    assert {conditions[t]["status"] for t in ("Paused", "Blocked", "Degraded")} == {"False"}
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.0.0"}
    reasons = await until(
        lambda: (r := rollout.event_reasons()) and "RolloutComplete" in r and r, 10, "events"
    )
    assert "RolloutStarted" in reasons


async def test_the_pause_annotation_pauses_and_clearing_it_resumes(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(rollout.apply)
    # The canary finished and the soak holds: pause now, so nothing more may start.
    await until(lambda: rollout.status().get("nodesComplete") == 1, 60, "the canary to complete")
    cluster.kubectl("annotate", "nodeprofile", rollout.name, "fleetwright.io/paused=true")
    paused = await until(
        lambda: (c := rollout.condition("Paused")) and c["status"] == "True" and c, 15, "Paused=True"
    )
    assert paused["reason"] == "PausedByUser"
    await asyncio.sleep(5)  # longer than the soak: a running rollout would have started the rest
    status = await asyncio.to_thread(rollout.status)
    assert status["phase"] == "Paused"
    assert status["nodesComplete"] == 1
    assert status["nodesInProgress"] == 0
    assert await asyncio.to_thread(rollout.cordoned) == []
    cluster.kubectl("annotate", "nodeprofile", rollout.name, "fleetwright.io/paused-")
    await asyncio.to_thread(rollout.wait_ready)
    assert rollout.condition("Paused")["status"] == "False"  # type: ignore[index]
    reasons = await until(
        lambda: (r := rollout.event_reasons()) and "RolloutComplete" in r and r, 10, "events"
    )
    assert {"RolloutPaused", "RolloutResumed"} <= set(reasons)


async def test_editing_the_profile_mid_rollout_rolls_out_the_new_generation(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    await asyncio.to_thread(rollout.apply, version="1.1.0")
    assert rollout.get()["metadata"]["generation"] == 2
    await until(lambda: rollout.status().get("observedGeneration") == 2, 20, "observedGeneration 2")
    await asyncio.to_thread(rollout.wait_ready)
    status = await asyncio.to_thread(rollout.status)
    assert status["observedGeneration"] == 2
    assert status["progress"] == "3/3"
    assert rollout.condition("Ready")["observedGeneration"] == 2  # type: ignore[index]
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.1.0"}


async def test_a_controller_restart_mid_rollout_only_delays_status(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout, temporal_client: Client
) -> None:
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    handle = temporal_client.get_workflow_handle(rollout_workflow_id(rollout.name))
    run_id = (await handle.describe()).run_id
    await controller.stop()
    frozen = await asyncio.to_thread(rollout.status)
    # The rollout goes on without the controller (the canary completes); only the status stands still.
    await until(lambda: "1.0.0" in rollout.recorded_versions(), 40, "the canary to complete")
    assert await asyncio.to_thread(rollout.status) == frozen
    assert frozen.get("nodesComplete", 0) == 0
    controller.start()
    await asyncio.to_thread(rollout.wait_ready)
    assert (await handle.describe()).run_id == run_id, "the restart started a second rollout"
    assert (await asyncio.to_thread(rollout.status))["progress"] == "3/3"


async def test_a_node_joining_mid_rollout_is_signalled_and_updated(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    (joined,) = await asyncio.to_thread(cluster.add_nodes, 1)
    await asyncio.to_thread(label_nodes, cluster, [joined], f"{GROUP_LABEL}={rollout.group}")
    await until(
        lambda: rollout.status().get("nodesTargeted") == 4,
        20,
        "the new node to be targeted",
        details=rollout.status,
    )
    await asyncio.to_thread(rollout.wait_ready)
    assert (await asyncio.to_thread(rollout.status))["progress"] == "4/4"
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.0.0"}
