"""A stand-in for what a node's kubelet and kernel do when fleetwright reboots the node.

kwok simulates pods and nodes, but nothing on a kwok node runs the agent's ``reboot``. This
watcher sees an interrupt Job pod asking for a node restart (the agent's base64 JSON argument)
and asks kwok for a new boot id through the ``sim.fleetwright.io/reboot`` annotation, as a real
reboot would change ``status.nodeInfo.bootID``. Used by the integration tests, the demo and the
benchmarks; never by the product against a real cluster.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwright.localcluster import nodes as fleet_nodes
from fleetwright.localcluster.ticker import Ticker

KubectlRunner = Callable[..., Any]
INTERRUPT_SELECTOR = "fleetwright.io/stage in (interrupt,uninstall-interrupt)"


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


@dataclass
class SimulatedKubelet:
    kubectl: KubectlRunner
    namespace: str = "fleetwright-system"
    interval: float = 0.3
    reboots: dict[str, int] = field(default_factory=dict)
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
        listing = self.kubectl("get", "pods", "-n", self.namespace, "-l", INTERRUPT_SELECTOR, "-o", "json")
        for pod in json.loads(listing.stdout)["items"]:
            uid, node = pod["metadata"]["uid"], pod["spec"].get("nodeName")
            if uid in self._seen or not node or not is_reboot(pod):
                continue
            self._seen.add(uid)
            generation = self.reboots.get(node, 0) + 1
            self.reboots[node] = generation
            new_boot = fleet_nodes.boot_id(node, generation=generation)
            self.kubectl(
                "annotate", "node", node, f"{fleet_nodes.REBOOT_ANNOTATION}={new_boot}", "--overwrite"
            )
