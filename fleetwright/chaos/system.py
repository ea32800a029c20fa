"""The system under chaos: the local stack (``local.stack``: control plane with kwok nodes, a local
Temporal server (its own dev server on a persistent sqlite database, or an attached server of
either backend), the simulated kubelet, and the worker and the controller as separate processes so
each can be SIGKILLed and restarted on its own), without the webhook, the scheduler or the UI,
which no fault touches.

Owns killing, freezing and restarting those pieces, terminating workflows and making fresh node
groups; it must not
decide when to break what (``faults`` and ``runner`` do), nor start the stack (``local.stack`` does).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from fleetwright.local import nodes as fleet_nodes
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.processes import Supervised, wait_until
from fleetwright.local.stack import LocalStack, StackOptions
from fleetwright.local.temporalserver import TemporalServer, temporal_cli
from fleetwright.workflows.enginesettings import EngineSettings

GROUP_LABEL = "chaos.fleetwright.io/group"
ATTACHED_FIRST_NODE = 50_000


@dataclass
class ChaosStack:
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fleetwright-chaos-")))
    attached: tuple[LocalCluster, TemporalServer] | None = None
    """A running control plane and Temporal server to use (and leave running) instead of own ones."""
    stack: LocalStack = field(init=False)
    _next_node: int = 0

    def __post_init__(self) -> None:
        # No GPU metrics: no chaos run has a metric check, and Prometheus's first scrape would
        # add about 5 s to an attached stack's start. No registry: no chaos run pins images, and
        # its CA in the settings would reach the previous release's processes the upgrade test
        # runs, which refuse a setting they do not know.
        options = StackOptions(
            cluster=ClusterOptions(),
            workdir=self.workdir,
            engine=EngineSettings(),
            ui=False,
            webhook=False,
            gpu_metrics=False,
            registry=False,
        )
        self.stack = LocalStack(options, attached=self.attached)
        if self.attached is not None:
            # Far above the indexes the launcher gives its own nodes, so names never collide.
            self._next_node = ATTACHED_FIRST_NODE

    @property
    def cluster(self) -> LocalCluster:
        return self.stack.cluster

    @property
    def temporal(self) -> TemporalServer:
        return self.stack.temporal

    @property
    def worker(self) -> Supervised:
        return self.stack.worker

    @property
    def controller(self) -> Supervised:
        return self.stack.controller

    # ----- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> ChaosStack:
        self.stack.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.thaw_temporal()
        self.stack.__exit__(exc_type, exc, tb)

    def configure(self, engine: EngineSettings) -> None:
        """Engine settings for the next rollout (the controller restarts to read them)."""
        self.stack.configure(engine)

    # ----- faults ----------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """SIGKILL one piece: worker, controller, temporal or a control-plane component."""
        if name == "worker":
            self.worker.kill()
        elif name == "controller":
            self.controller.kill()
        elif name == "temporal":
            self.temporal.kill()
        else:
            self.cluster.kill_component(name)

    def restart(self, name: str) -> None:
        if name == "worker":
            self.worker.start()
        elif name == "controller":
            self.controller.start()
        elif name == "temporal":
            self.temporal.start()
        else:
            self.cluster.start_component(name)

    def freeze_temporal(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (unreachable, not refused)."""
        self.temporal.process.freeze()

    def thaw_temporal(self) -> None:
        self.temporal.process.thaw()

    def terminate_workflow(self, workflow_id: str) -> None:
        """Terminate a workflow as a human does in the Temporal UI (no error if it ended)."""
        temporal_cli(
            "workflow",
            "terminate",
            "--workflow-id",
            workflow_id,
            "--reason",
            "chaos: terminated by an operator",
            "--namespace",
            self.temporal.namespace,
            "--address",
            self.temporal.address,
        )

    def supervise(self) -> list[str]:
        """What the kubelet does for the chart's pods: start the worker or the controller again
        when it exited on its own (e.g. Temporal unreachable while it connected); returns which.
        Temporal or the control plane dying on its own is not expected: that fails the run."""
        revived = []
        for piece in (self.worker, self.controller):
            if piece.process is not None and not piece.running:
                piece.start()
                revived.append(piece.name)
        self.temporal.process.check_alive()
        return revived

    # ----- nodes -----------------------------------------------------------------------------
    def add_group(self, group: str, count: int) -> list[str]:
        """``count`` fresh simulated nodes labelled into ``group``; names are never reused, even
        after nodes were deleted, so a later group never collides with a deleted node's name."""
        manifests = fleet_nodes.fleet(count, start=self._next_node)
        self._next_node += count
        for manifest in manifests:
            manifest["metadata"].setdefault("labels", {})[GROUP_LABEL] = group
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        self.cluster.kubectl("create", "-f", "-", input=body)
        names = [m["metadata"]["name"] for m in manifests]
        wait_until(lambda: self._ready(group) >= set(names), timeout=120, what=f"{count} nodes of {group}")
        return names

    def _ready(self, group: str) -> set[str]:
        result = self.cluster.kubectl(
            "get", "nodes", "-l", f"{GROUP_LABEL}={group}", "-o", "json", check=False
        )
        if result.returncode != 0:
            return set()
        return {
            n["metadata"]["name"]
            for n in json.loads(result.stdout)["items"]
            for c in n.get("status", {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        }

    def remove_group(self, group: str) -> None:
        self.cluster.kubectl("delete", "nodes", "-l", f"{GROUP_LABEL}={group}", "--wait=false", check=False)
