"""Harness for engine integration tests: an in-process worker with the real activities against
the local control plane and the Temporal dev server, a simulated kubelet that "reboots" a node
when an interrupt Job runs on it, and samplers that watch invariants while a rollout runs."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwright.localcluster import nodes as fleet_nodes
from fleetwright.planner.fleet import cordon_key
from tests.support.providers import ClusterUnderTest

FAST_PODS = {
    "pod-complete.stage.kwok.x-k8s.io/delay": "300ms",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "0s",
    "pod-ready.stage.kwok.x-k8s.io/delay": "100ms",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def kubectl_json(cluster: ClusterUnderTest, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def label_nodes(cluster: ClusterUnderTest, nodes: list[str], label: str) -> None:
    cluster.kubectl("label", "node", *nodes, label, "--overwrite")


@dataclass
class Sampler:
    """Polls the cluster on a thread and records the worst value ``measure`` returned."""

    measure: Callable[[], int]
    interval: float = 0.3
    worst: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                value = self.measure()
            except Exception:
                value = 0
            self.worst = max(self.worst, value)
            self.samples += 1
            self._stop.wait(self.interval)


def cordoned_by(cluster: ClusterUnderTest, profile: str) -> Callable[[], int]:
    key = cordon_key(profile)

    def count() -> int:
        nodes = kubectl_json(cluster, "nodes")["items"]
        return sum(
            1 for n in nodes if n["spec"].get("unschedulable") and key in n["metadata"].get("annotations", {})
        )

    return count


@dataclass
class SimulatedKubelet:
    """Stands in for the node rebooting when an interrupt Job's pod runs: it asks kwok for a new
    boot id (the ``sim.fleetwright.io/reboot`` annotation). Real hosts do this by rebooting."""

    cluster: ClusterUnderTest
    namespace: str = "fleetwright-system"
    reboots: dict[str, int] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> SimulatedKubelet:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self._poll()
            self._stop.wait(0.3)

    def _poll(self) -> None:
        pods = kubectl_json(
            self.cluster,
            "pods",
            "-n",
            self.namespace,
            "-l",
            "fleetwright.io/stage in (interrupt,uninstall-interrupt)",
        )["items"]
        for pod in pods:
            uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName")
            if uid in self._seen or not node or not _is_reboot(pod):
                continue
            self._seen.add(uid)
            generation = self.reboots.get(node, 0) + 1
            self.reboots[node] = generation
            new_boot = fleet_nodes.boot_id(node, generation=generation)
            self.cluster.kubectl(
                "annotate", "node", node, f"{fleet_nodes.REBOOT_ANNOTATION}={new_boot}", "--overwrite"
            )


def _is_reboot(pod: dict[str, Any]) -> bool:
    """The interrupt data (base64 JSON, the agent's last argument) asks for a node restart."""
    for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
        args = container.get("args") or []
        if args and args[0] == "interrupt":
            try:
                return bool(json.loads(base64.b64decode(args[-1]))["type"] == "node_restart")
            except (ValueError, KeyError):
                return False
    return False


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
