"""A local stack's member clusters, for campaigns: more local control planes, each with its own
simulated fleet and simulated kubelet, the CRDs and the package namespace fleetwright needs in a
member, and its kubeconfig (credentials inline) in a Secret ``<cluster>-kubeconfig`` of the home
cluster's package namespace, where the worker finds it when a Campaign names it. The home
cluster is registered the same way, so a campaign can include it. One Temporal server and one
worker serve them all (``worker.members``)."""

from __future__ import annotations

import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from fleetwright.api.campaign import KUBECONFIG_KEY
from fleetwright.api.crdgen import CRDS, rendered_files
from fleetwright.local.controlplane import ClusterOptions, LocalCluster, inline_kubeconfig
from fleetwright.local.kubectl import KubectlRunner, create_package_namespace, wait_established
from fleetwright.local.kubelet import watched_kubelet


def member_secret(cluster: str) -> str:
    """The Secret holding a local member's kubeconfig."""
    return f"{cluster}-kubeconfig"


def cluster_names(count: int) -> list[str]:
    """The names of a stack's ``count`` clusters: the home cluster first."""
    return [f"cluster-{i}" for i in range(1, count + 1)]


def register(home: KubectlRunner, namespace: str, cluster: str, kubeconfig: Path) -> None:
    """Put ``cluster``'s kubeconfig, credentials inline, in its Secret in the home cluster."""
    config = inline_kubeconfig(yaml.safe_load(kubeconfig.read_text()))
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": member_secret(cluster), "namespace": namespace},
        "stringData": {KUBECONFIG_KEY: yaml.safe_dump(config)},
    }
    home("apply", "-f", "-", input=json.dumps(secret))


def prepare(kubectl: KubectlRunner, namespace: str) -> None:
    """What a member cluster needs of fleetwright: its CRDs and the package namespace."""
    kubectl("apply", "-f", "-", input="---\n".join(rendered_files().values()))
    wait_established(kubectl, [spec.name for spec in CRDS])
    create_package_namespace(kubectl, namespace)


@dataclass
class MemberClusters:
    """The member control planes beyond the home cluster, started and stopped together."""

    names: list[str]
    options: ClusterOptions
    workdir: Path
    clusters: dict[str, LocalCluster] = field(init=False, default_factory=dict)
    _exit: contextlib.ExitStack = field(init=False, default_factory=contextlib.ExitStack)
    _started: list[LocalCluster] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        for name in self.names:
            options = replace(self.options, workdir=self.workdir / name, real_node=None)
            self.clusters[name] = LocalCluster(options)

    def start(self, home: KubectlRunner, namespace: str) -> None:
        """Start every member, prepare it and register it in the home cluster."""
        for name, cluster in self.clusters.items():
            self._started.append(cluster)
            cluster.start()
            prepare(cluster.kubectl, namespace)
            self._exit.enter_context(watched_kubelet(cluster.kubeconfig, cluster.kubectl))
            register(home, namespace, name, cluster.kubeconfig)

    def stop(self) -> None:
        """The simulated kubelets, then every member at once (an API server takes seconds to stop)."""
        self._exit.close()
        with ThreadPoolExecutor(max_workers=max(1, len(self._started))) as pool:
            list(pool.map(LocalCluster.stop, self._started))
        self._started.clear()
