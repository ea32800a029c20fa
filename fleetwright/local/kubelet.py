"""A stand-in for what a node's kubelet and kernel do when fleetwright reboots the node.

kwok simulates pods and nodes, but nothing on a kwok node runs the agent's ``reboot``. This
watcher sees an interrupt Job pod asking for a node restart (the agent's base64 JSON argument)
and asks kwok for a new boot id through the ``sim.fleetwright.io/reboot`` annotation, as a real
reboot would change ``status.nodeInfo.bootID``. Used by the integration tests, the demo and the
benchmarks; never by the product against a real cluster. It reaches the apiserver through a
``KubeletApi``: kubectl by default, a long-lived client in the benchmarks (a kubectl process per
poll would compete for the CPU with what they measure).

``watched_kubelet`` runs it on one long-lived client whose interrupt pods come from one watch,
for stacks that stay up: polling with a kubectl process per look costs a long-running stack or a
benchmark a large share of a core.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fleetwright.api.keys import STAGE_LABEL
from fleetwright.kube import nodestatus
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.kube.listwatch import ListWatch, WatchEvent, start_thread
from fleetwright.local import nodes as fleet_nodes
from fleetwright.local.ticker import Ticker
from fleetwright.planner.node.stages import Stage

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


# The simulated kubelet looks at its watched interrupt pods five times a second (a look makes no
# request): a reboot lands within 0.2 s of its pod, as a node's own agent would reboot it.
KUBELET_POLL_SECONDS = 0.2
KUBELET_AGENT = "simulated-kubelet"


def slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What the simulated kubelet reads of an interrupt pod: its uid, node and container args."""
    spec = pod.get("spec") or {}

    def args(key: str) -> list[dict[str, Any]]:
        return [{"args": c.get("args") or []} for c in spec.get(key) or []]

    return {
        "metadata": {"uid": (pod.get("metadata") or {}).get("uid")},
        "spec": {
            "nodeName": spec.get("nodeName"),
            "initContainers": args("initContainers"),
            "containers": args("containers"),
        },
    }


@dataclass
class WatchedKubeletApi:
    """The simulated kubelet's calls on one long-lived client; the interrupt pods come from one
    watch, so a poll makes no request. Listing them each second would be most of the simulation's
    cost: stage Jobs and their pods are kept, so late in a large run each poll would list every
    finished pod of the fleet."""

    api: ApiClient
    namespace: str
    selector: str = INTERRUPT_SELECTOR
    _pods: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)

    def __enter__(self) -> WatchedKubeletApi:
        watch = ListWatch(
            self.api,
            "pods",
            self._deliver,
            self._stop,
            namespace=self.namespace,
            label_selector=self.selector,
            slim=slim_pod,
        )
        start_thread(watch)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def _deliver(self, event: WatchEvent) -> None:
        with self._lock:
            if event.type == "SYNC":
                self._pods = {str(p["metadata"]["uid"]): p for p in event.items}
            elif event.obj is not None and event.type == "DELETED":
                self._pods.pop(str(event.obj["metadata"]["uid"]), None)
            elif event.obj is not None:
                self._pods[str(event.obj["metadata"]["uid"])] = event.obj

    def interrupt_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        # Finished pods too (as a list would): an interrupt pod may finish between two polls.
        if (namespace, selector) != (self.namespace, self.selector):
            raise ValueError(
                f"watching {self.selector!r} in {self.namespace}, asked {selector!r} in {namespace}"
            )
        with self._lock:
            return list(self._pods.values())

    def annotate_node(self, node: str, key: str, value: str) -> None:
        nodestatus.merge_metadata(self.api, node, annotations={key: value})


@contextlib.contextmanager
def watched_kubelet(kubeconfig: Path, kubectl: KubectlRunner) -> Iterator[SimulatedKubelet]:
    """The simulated kubelet on a watch of its own client (User-Agent ``simulated-kubelet``, so an
    audit log tells its writes apart), for as long as the ``with`` block runs."""
    api = from_kubeconfig(kubeconfig)
    api.user_agent = KUBELET_AGENT
    kubelet = SimulatedKubelet(kubectl, interval=KUBELET_POLL_SECONDS)
    with WatchedKubeletApi(api, kubelet.namespace) as watched:
        kubelet.api = watched
        with kubelet:
            yield kubelet
