"""Cluster providers for the integration tier.

``local`` (the default) is fleetwright's own launcher: real etcd, kube-apiserver and
kube-controller-manager built from Go modules, with kwok nodes. ``k3s`` runs K3s through
testcontainers where a Docker engine is reachable, and runs the same kwok and stages against it.
Select with ``FLEETWRIGHT_CLUSTER_PROVIDER``. A provider that cannot run says so; it never passes.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.kubectl import create_package_namespace, run_kubectl
from fleetwright.local.kwok import KwokFleet
from fleetwright.workflows.enginesettings import EngineSettings
from tests.support.waiting import wait_for

PROVIDER_ENV = "FLEETWRIGHT_CLUSTER_PROVIDER"
# The session's fleet only grows (each test adds the nodes it needs, hundreds by the end): kwok
# renewing every lease once a minute instead of every 10 s keeps them from costing the apiserver,
# etcd and kwok CPU the tests need (300 idle nodes renewing every 10 s: about a fifth of a core).
# No test waits for a lease to expire.
SESSION_LEASE_SECONDS = 240


class ProviderUnavailableError(RuntimeError):
    """The selected provider cannot run on this machine; the message says why."""


class ClusterUnderTest(Protocol):
    kubeconfig: Path
    server: str

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]: ...

    def add_nodes(self, count: int, *, wait: bool = True) -> list[str]: ...

    def stop(self) -> None: ...


def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        import docker  # type: ignore[import-untyped]  # noqa: PLC0415 - optional, testcontainers' dependency
    except ImportError as error:
        return f"the docker client library is missing: {error}"
    try:
        client = docker.from_env(timeout=3)
        client.ping()
    except Exception as error:
        return f"no Docker engine reachable ({type(error).__name__}: {error})"
    return None


@dataclass
class K3sCluster:
    """K3s in a container, with our kwok binary simulating nodes against it."""

    image: str = "rancher/k3s:v1.36.3-k3s1"
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)

    def __post_init__(self) -> None:
        reason = docker_unavailable_reason()
        if reason is not None:
            raise ProviderUnavailableError(f"k3s provider unavailable: {reason}")
        from testcontainers.k3s import K3SContainer  # noqa: PLC0415 - needs Docker

        self._container = K3SContainer(self.image)
        self._container.start()
        workdir = Path(tempfile.mkdtemp(prefix="fleetwright-k3s-"))
        self.kubeconfig = workdir / "kubeconfig"
        self.kubeconfig.write_text(self._container.config_yaml())
        self.server = str(yaml.safe_load(self._container.config_yaml())["clusters"][0]["cluster"]["server"])
        # The same kwok binary and stages as the local provider, pointed at K3s.
        self.fleet = KwokFleet(self.kubeconfig, workdir, self.kubectl)
        self.fleet.process.start()
        wait_for(self.fleet.healthy, 60, "kwok", alive=self.fleet.process.check_alive)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        return run_kubectl(self.kubeconfig, *args, input=input, check=check, timeout=timeout)

    def add_nodes(self, count: int, *, wait: bool = True) -> list[str]:
        return self.fleet.add_nodes(count, wait=wait)

    def stop(self) -> None:
        self.fleet.process.stop()
        self._container.stop()


def start_cluster(provider: str | None = None) -> ClusterUnderTest:
    """Start the provider named by ``provider`` or the environment (default ``local``)."""
    name = provider or os.environ.get(PROVIDER_ENV, "local")
    started: ClusterUnderTest
    if name == "local":
        local = LocalCluster(ClusterOptions(node_lease_seconds=SESSION_LEASE_SECONDS))
        local.start()
        started = local
    elif name == "k3s":
        started = K3sCluster()
    else:
        raise ProviderUnavailableError(f"{PROVIDER_ENV}={name!r}: expected 'local' or 'k3s'")
    # As the chart would: the engine's package namespace exists before any stage Job.
    create_package_namespace(started.kubectl, EngineSettings().package_namespace)
    return started
