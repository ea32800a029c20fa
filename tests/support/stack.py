"""A running fleetwright stack for integration tests: CRDs installed, an in-process worker with
the real activities, the controller (startable and stoppable like a rescheduled pod), and a
profile + policy on its own group of kwok nodes with helpers to read its status, Events and nodes.
The fixtures that wire these together live in ``tests/integration/conftest.py``."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from fleetwright.api.crdgen import CRDS
from fleetwright.api.keys import cordon_key
from fleetwright.controller.reconcile import ControllerOptions, run_controller
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local import examples
from fleetwright.local.kubectl import wait_established
from fleetwright.planner.node.state import read_profile_state
from fleetwright.process.settings import WorkerSettings
from fleetwright.workflows.enginesettings import EngineSettings
from tests.support.engine import FAST_PODS, kubectl_json
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
GROUP_LABEL = "test.fleetwright.io/group"
OPTIONS = ControllerOptions(status_interval_seconds=1.0, watch_window_seconds=5, refresh_delay_seconds=0.3)


def install_crds(cluster: ClusterUnderTest) -> None:
    """Idempotent; the CRDs are left in place for later tests."""
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    wait_established(cluster.kubectl, [spec.name for spec in CRDS])


LOST_WORKER_HEARTBEAT_SECONDS = 10
"""``engine.heartbeat_timeout_seconds`` of a test that kills or stops a worker mid-activity: the
activity's next attempt starts within seconds of the loss, not the default half-minute."""


def engine_settings() -> EngineSettings:
    return EngineSettings(
        observe_interval_seconds=2,
        ended_check_seconds=2,
        stage_pod_annotations=FAST_PODS,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        reboot_timeout_seconds=120,
    )


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
            # A pod's default termination grace period: cancelled tasks wait for the Kubernetes or
            # Temporal call their thread is in, which can take over 10 s on a loaded machine.
            await asyncio.wait_for(self.task, timeout=30)
            self.task = None


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
        """Teardown, not the product's deletion (tests of that drive it themselves): the finalizer
        is dropped once the deletion has begun (no finalizer can be added after that), so a test
        that left the rollout blocked or halted never holds up the session with an uninstall."""
        self.cluster.kubectl(
            "delete",
            "nodeprofile,deploymentpolicy",
            self.name,
            "--ignore-not-found",
            "--wait=false",
            check=False,
        )
        self.cluster.kubectl(
            "patch",
            "nodeprofile",
            self.name,
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
            check=False,
        )


def _manifest(dumped: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dumped.items() if k != "status"}


def first_cordon_latency(cluster: ClusterUnderTest, rollout: Rollout, timeout: float = 30) -> float:
    """Apply the rollout and poll the API (no kubectl process per sample) until one of its nodes
    is cordoned by the profile; seconds from the apply's return."""
    core = k8s.CoreV1Api(from_kubeconfig(cluster.kubeconfig))
    key = cordon_key(rollout.name)
    rollout.apply()
    started = time.monotonic()

    def cordoned() -> bool:
        nodes = core.list_node(label_selector=f"{GROUP_LABEL}={rollout.group}").items
        return any(
            n.spec and n.spec.unschedulable and key in ((n.metadata and n.metadata.annotations) or {})
            for n in nodes
        )

    wait_for(cordoned, timeout, f"a node of {rollout.name} cordoned by it", interval=0.02)
    return time.monotonic() - started
