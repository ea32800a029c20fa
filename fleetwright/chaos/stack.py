"""The system under chaos: the local control plane with kwok nodes, a local Temporal server (its
own dev server on a persistent sqlite database, or an attached server of either backend), the
simulated kubelet, and the worker and the controller as separate processes so each can be
SIGKILLed and restarted on its own.

Owns starting, killing, freezing and restarting those pieces and making fresh node groups; it must
not decide when to break what (``faults`` and ``runner`` do).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from fleetwright.api.crdgen import CRDS, rendered_files
from fleetwright.localcluster import nodes as fleet_nodes
from fleetwright.localcluster.cluster import ClusterOptions, LocalCluster, wait_established
from fleetwright.localcluster.kubelet import SimulatedKubelet
from fleetwright.localcluster.processes import Supervised, wait_until
from fleetwright.localcluster.temporal import LocalTemporal, TemporalServer
from fleetwright.worker.settings import WorkerSettings
from fleetwright.workflows.payloads import EngineSettings
from fleetwright.workflows.search import REGISTRATION

GROUP_LABEL = "chaos.fleetwright.io/group"
ATTACHED_FIRST_NODE = 50_000


@dataclass
class ChaosStack:
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fleetwright-chaos-")))
    cluster: LocalCluster = field(init=False)
    temporal: TemporalServer = field(init=False)
    worker: Supervised = field(init=False)
    controller: Supervised = field(init=False)
    attached: tuple[LocalCluster, TemporalServer] | None = None
    """A running control plane and Temporal server to use (and leave running) instead of own ones."""
    _next_node: int = 0
    _exit: ExitStack = field(default_factory=ExitStack)

    def __post_init__(self) -> None:
        if self.attached is not None:
            self.cluster, self.temporal = self.attached
            # Far above the indexes the launcher gives its own nodes, so names never collide.
            self._next_node = ATTACHED_FIRST_NODE
        else:
            self.cluster = LocalCluster(ClusterOptions(workdir=self.workdir / "cluster"))
            self.temporal = LocalTemporal(
                search_attributes=REGISTRATION, workdir=self.workdir / "temporal", ui=False
            )
        self.settings_path = self.workdir / "settings.json"
        env = {**os.environ, "FLEETWRIGHT_SETTINGS": str(self.settings_path)}
        logs = self.workdir / "logs"
        # The processes the Helm chart deploys, started as ``fleetwright worker|controller``.
        command = [sys.executable, "-m", "fleetwright.cli.main"]
        self.worker = Supervised("worker", [*command, "worker"], logs / "worker.log", env)
        self.controller = Supervised("controller", [*command, "controller"], logs / "controller.log", env)

    # ----- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> ChaosStack:
        try:
            if self.attached is None:
                self.cluster.start()
                self._exit.callback(self.cluster.stop)
                self.temporal.start()
                self._exit.callback(self.temporal.stop)
            crds = "---\n".join(rendered_files().values())
            self.cluster.kubectl("apply", "-f", "-", input=crds)
            wait_established(self.cluster.kubectl, [spec.name for spec in CRDS])
            self._exit.enter_context(SimulatedKubelet(self.cluster.kubectl))
            self.configure(EngineSettings())
            self.worker.start()
            self._exit.callback(self.worker.stop)
            self._exit.callback(self.controller.stop)
        except BaseException:
            self._exit.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.thaw_temporal()
        self._exit.close()

    def configure(self, engine: EngineSettings) -> None:
        """Engine settings for the next rollout: the controller hands them to new workflows, so it
        restarts (gracefully) to read them."""
        settings = WorkerSettings(
            temporal_address=self.temporal.address,
            temporal_namespace=self.temporal.namespace,
            kubeconfig=self.cluster.kubeconfig,
            engine=engine,
        )
        self.settings_path.write_text(json.dumps(settings.model_dump(mode="json")))
        self.controller.stop()
        self.controller.start()

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
        self._signal_temporal(signal.SIGSTOP)

    def thaw_temporal(self) -> None:
        self._signal_temporal(signal.SIGCONT)

    def _signal_temporal(self, sig: signal.Signals) -> None:
        pid = self.temporal.process.pid
        if pid is not None and self.temporal.process.running:
            os.killpg(pid, sig)

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
