"""kwok simulating fleetwright's GPU nodes against an apiserver: its stages (a stage pod's life and
log), its worker pools sized for the fleet, and the creation of the simulated Node objects.
"""

from __future__ import annotations

import json
import math
import ssl
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from fleetwright.binaries import control_plane_binary
from fleetwright.local import nodes as fleet_nodes
from fleetwright.local.kubectl import KubectlRunner
from fleetwright.local.loopback import LOOPBACK, free_port, http_ok
from fleetwright.local.pki import LocalCA
from fleetwright.local.processes import Supervised, wait_until

# Simulated stage pods (fleetwright's package namespace) all serve this log.
STAGE_NAMESPACE = "fleetwright-system"
STAGE_LOG_FILE = "kwok-stage.log"
STAGE_LOG = ("simulated stage container (kwok): no process ran", "stage finished")
# kwok renews node leases with this many nodes per worker (at least its default 4 workers).
NODES_PER_LEASE_WORKER = 32
KWOK_DEFAULT_WORKERS = 4


def kwok_configuration(nodes: int) -> dict[str, Any] | None:
    """kwok's worker pools sized for the fleet it starts with, or None where its defaults do. One
    kwok process stands in for every node's kubelet; with its defaults (4 lease workers) on 2
    loaded cores, 1,000 leases are not renewed within the grace period and the node lifecycle
    controller marks hundreds of nodes NotReady mid-rollout, which fleetwright then rightly
    refuses to touch. Real nodes each renew their own."""
    leases = max(KWOK_DEFAULT_WORKERS, math.ceil(nodes / NODES_PER_LEASE_WORKER))
    if leases == KWOK_DEFAULT_WORKERS:
        return None
    stages = max(KWOK_DEFAULT_WORKERS, leases // 2)
    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        # kwok v0.8.0 does not default a KwokConfiguration read from a file (only the one it makes
        # when there is none), so every option its flags do not set is spelled out with kwok's
        # default: without enableDebuggingHandlers the kubelet endpoint answers pods/log with 405.
        "options": {
            "enableDebuggingHandlers": True,
            "enableProfilingHandler": True,
            "enableContentionProfiling": False,
            "podsOnNodeSyncParallelism": 1,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": False,
            "nodeLeaseParallelism": leases,
            "nodePlayStageParallelism": stages,
            "podPlayStageParallelism": stages,
        },
    }


class KwokFleet:
    """kwok simulating fleetwright's GPU nodes against any apiserver, plus node creation.

    Shared by the local control plane and the K3s test provider, so both run the same stages.
    """

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        kubectl: KubectlRunner,
        *,
        nodes: int = 0,
        lease_seconds: int = 40,
    ) -> None:
        self._kubectl = kubectl
        self.port = free_port()
        stages = workdir / "kwok-stages.yaml"
        stages.write_text(
            resources.files("fleetwright.local").joinpath("stages.yaml").read_text()
            + _stage_logs(workdir / STAGE_LOG_FILE)
            + _sized(kwok_configuration(nodes))
        )
        # kwok's server is each node's kubelet endpoint (daemonEndpoints port = its port): the
        # apiserver proxies pods/log there over HTTPS. Its own throwaway CA: the apiserver does not
        # verify kubelet serving certificates here (no --kubelet-certificate-authority).
        kwok_ca = LocalCA(workdir / "kwok-pki", common_name="fleetwright-kwok-ca")
        serving = kwok_ca.issue("kwok-serving", common_name="kwok", ip_addresses=(LOOPBACK,), server=True)
        self._ca_file = kwok_ca.cert_path
        self.process = Supervised(
            "kwok",
            [
                str(control_plane_binary("kwok")),
                f"--kubeconfig={kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={fleet_nodes.KWOK_ANNOTATION}=fake",
                "--cidr=10.244.0.1/16",
                f"--node-ip={LOOPBACK}",
                f"--server-address={LOOPBACK}:{self.port}",
                f"--node-port={self.port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--node-lease-duration-seconds={lease_seconds}",
            ],
            workdir / "logs" / "kwok.log",
        )

    def healthy(self) -> bool:
        context = ssl.create_default_context(cafile=str(self._ca_file))
        return http_ok(f"https://{LOOPBACK}:{self.port}/healthz", context)

    def _nodes(self) -> list[dict[str, Any]]:
        result = self._kubectl("get", "nodes", "-o", "json", check=False, timeout=600)
        return list(json.loads(result.stdout)["items"]) if result.returncode == 0 else []

    def add_nodes(self, count: int, *, wait: bool = True) -> list[str]:
        if count <= 0:
            return []
        start = sum(
            1 for n in self._nodes() if fleet_nodes.KWOK_ANNOTATION in n["metadata"].get("annotations", {})
        )
        manifests = fleet_nodes.fleet(count, start=start)
        for chunk_start in range(0, len(manifests), 500):
            chunk = manifests[chunk_start : chunk_start + 500]
            # kubectl's default 120 s is not enough for 500 Nodes on an apiserver that is already
            # serving thousands of them on a loaded machine (a 10,000-node fleet).
            self._kubectl(
                "create",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": chunk}),
                timeout=600,
            )
        names = [m["metadata"]["name"] for m in manifests]
        if wait:
            wait_until(
                lambda: self._ready_names() >= set(names),
                timeout=max(60.0, count * 0.2),
                what=f"{count} kwok nodes to become Ready",
                alive=self.process.check_alive,
            )
        return names

    def _ready_names(self) -> set[str]:
        return {
            node["metadata"]["name"]
            for node in self._nodes()
            for c in node.get("status", {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        }


def _sized(configuration: dict[str, Any] | None) -> str:
    return "" if configuration is None else "\n---\n" + yaml.safe_dump(configuration)


def _stage_logs(path: Path) -> str:
    """A kwok ClusterLogs rule: every container of a stage pod serves ``path`` as its log (CRI log
    format), so ``kubectl logs`` and ``fleetwright logs`` read a log through the apiserver."""
    path.write_text(
        "".join(f"2026-01-01T00:00:0{i}.000000000Z stdout F {line}\n" for i, line in enumerate(STAGE_LOG))
    )
    rule = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "fleetwright-stage-logs"},
        "spec": {"selector": {"matchNamespaces": [STAGE_NAMESPACE]}, "logs": [{"logsFile": str(path)}]},
    }
    return "\n---\n" + yaml.safe_dump(rule)
