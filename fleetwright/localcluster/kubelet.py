"""A stand-in for what a node's kubelet and kernel do when fleetwright reboots the node.

kwok simulates pods and nodes, but nothing on a kwok node runs the agent's ``reboot``. This
watcher sees an interrupt Job pod asking for a node restart (the agent's base64 JSON argument)
and asks kwok for a new boot id through the ``sim.fleetwright.io/reboot`` annotation, as a real
reboot would change ``status.nodeInfo.bootID``. Used by the integration tests, the demo and the
benchmarks; never by the product against a real cluster. It reaches the apiserver through a
``KubeletApi``: kubectl by default, a long-lived client in the benchmarks (a kubectl process per
poll would compete for the CPU with what they measure).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fleetwright.api.keys import STAGE_LABEL
from fleetwright.localcluster import nodes as fleet_nodes
from fleetwright.localcluster.ticker import Ticker
from fleetwright.planner.stages import Stage

KubectlRunner = Callable[..., Any]
INTERRUPT_SELECTOR = f"{STAGE_LABEL} in ({','.join(s.value for s in Stage if s.is_interrupt)})"


def is_reboot(pod: dict[str, Any]) -> bool:
    """The interrupt data (base64 JSON, the agent's last argument) asks for a node restart."""
    for container in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]:
        args = container.get("args") or []
        if args and args[0] == "interrupt":
            try:
                return bool(json.loads(base64.b64decode(args[-1]))["type"] == "node_restart")
            except (ValueError, KeyError):
                return False
    return False


class KubeletApi(Protocol):
    """The two calls the simulated kubelet makes."""

    def interrupt_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...

    def annotate_node(self, node: str, key: str, value: str) -> None: ...


@dataclass(frozen=True)
class KubectlKubeletApi:
    kubectl: KubectlRunner

    def interrupt_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        listing = self.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
        items: list[dict[str, Any]] = json.loads(listing.stdout)["items"]
        return items

    def annotate_node(self, node: str, key: str, value: str) -> None:
        self.kubectl("annotate", "node", node, f"{key}={value}", "--overwrite")


@dataclass
class SimulatedKubelet:
    kubectl: KubectlRunner
    namespace: str = "fleetwright-system"
    interval: float = 0.3
    reboots: dict[str, int] = field(default_factory=dict)
    api: KubeletApi | None = None
    """How it reaches the apiserver; through ``kubectl`` when None."""
    _seen: set[str] = field(default_factory=set)
    _ticker: Ticker | None = None

    def __enter__(self) -> SimulatedKubelet:
        self._ticker = Ticker(self._tick, self.interval, name="simulated-kubelet").__enter__()
        return self

    def __exit__(self, *_: object) -> None:
        if self._ticker is not None:
            self._ticker.__exit__(None, None, None)

    def _tick(self) -> None:
        # A failed poll (apiserver restarting) is retried on the next tick.
        with contextlib.suppress(Exception):
            self.poll()

    def poll(self) -> None:
        api = self.api or KubectlKubeletApi(self.kubectl)
        for pod in api.interrupt_pods(self.namespace, INTERRUPT_SELECTOR):
            uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName")
            if uid in self._seen or not node or not is_reboot(pod):
                continue
            self._seen.add(uid)
            generation = self.reboots.get(node, 0) + 1
            self.reboots[node] = generation
            new_boot = fleet_nodes.boot_id(node, generation=generation)
            api.annotate_node(node, fleet_nodes.REBOOT_ANNOTATION, new_boot)
