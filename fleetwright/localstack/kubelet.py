"""The simulated kubelet's apiserver calls on one long-lived client, the interrupt pods coming
from one watch (``localcluster.kubelet.KubeletApi``), for stacks that stay up: polling with a
kubectl process per look costs a long-running stack or a benchmark a large share of a core.

Owns the watch of the interrupt pods and the reboot annotation write; when to reboot what is the
simulated kubelet's (``localcluster.kubelet``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwright.kube import nodestatus
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.kube.listwatch import ListWatch, WatchEvent, start_thread
from fleetwright.localcluster.cluster import KubectlRunner
from fleetwright.localcluster.kubelet import INTERRUPT_SELECTOR, SimulatedKubelet

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
