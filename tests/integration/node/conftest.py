"""The node tier: the local control plane with one real node (a real kubelet, containerd and runc
running the images this checkout builds, pulled by digest from the local OCI registry they were
pushed to) beside the kwok fleet.

One cluster serves the whole session; the first node test starts it. Stage pods mount the real
node's scratch host root (``engine.host_root``), whose reboot, sysctl and systemctl only record.
Around it all, this machine's kernel parameters and the kubelet's, containerd's and the CNI's
default directories are compared before and after: a node test that changed them fails.

A machine that cannot run the node fails every test here with the reason, never skips them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwright.local import nodehost
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.kubectl import create_package_namespace
from fleetwright.local.nodeconfig import TEMPORAL_ADDRESS
from fleetwright.local.realnode import RealNode, RealNodeOptions, engine_fields, linked_to_temporal
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.registry import RegistryAccess
from fleetwright.workflows.enginesettings import EngineSettings
from tests.support.stack import engine_settings


@pytest.fixture(scope="session")
def cluster(temporal_server: LocalTemporal) -> Iterator[LocalCluster]:
    missing = nodehost.requirements()
    if missing:
        pytest.fail("the node tier cannot run on this machine: " + "; ".join(missing), pytrace=False)
    kernel, defaults = nodehost.kernel_parameters(), nodehost.host_defaults_present()
    options = ClusterOptions(real_node=linked_to_temporal(RealNodeOptions(), temporal_server.port))
    started = LocalCluster(options)
    started.start()
    create_package_namespace(started.kubectl, EngineSettings().package_namespace)
    assert started.real_node is not None
    started.real_node.watch_reboots()
    try:
        yield started
    finally:
        cgroup_root = started.real_node.cgroup_root
        started.stop()
        assert nodehost.kernel_parameters() == kernel, "the node changed this machine's kernel parameters"
        assert nodehost.host_defaults_present() == defaults, "the node wrote outside its scratch directory"
        assert nodehost.cgroups_left(cgroup_root) == [], "the node left cgroups behind"


@pytest.fixture(scope="session")
def real_node(cluster: LocalCluster) -> RealNode:
    assert cluster.real_node is not None
    return cluster.real_node


@pytest.fixture(scope="session")
def host_root(real_node: RealNode) -> HostRoot:
    return real_node.host_root


@pytest.fixture(scope="session")
def temporal_on_node(real_node: RealNode) -> str:
    """The Temporal dev server's address as the real node's pods see it."""
    return TEMPORAL_ADDRESS


@pytest.fixture
def registry_access(real_node: RealNode) -> RegistryAccess:
    """The in-process worker's image pinning trusts the real node's registry."""
    return RegistryAccess(ca_file=str(real_node.registry.ca_file))


@pytest.fixture
def engine(cluster: LocalCluster, real_node: RealNode) -> EngineSettings:
    """Stage pods mount the real node's scratch host root and run the images it pulls from its
    registry, each package image pinned to its digest there at the generation's start."""
    update = {**engine_fields(real_node), "image_pinning": True}
    settings = engine_settings().model_copy(update=update)
    # The chart's tests install and uninstall the package namespace (the chart owns it); a rollout
    # after them needs it back, as the chart would have made it.
    package_namespace = settings.package_namespace
    phase = cluster.kubectl(
        "get", "namespace", package_namespace, "-o", "jsonpath={.status.phase}", check=False
    ).stdout
    if phase == "Terminating":
        gone = f"namespace/{package_namespace}"
        cluster.kubectl("wait", "--for=delete", gone, "--timeout=180s", timeout=200)
    create_package_namespace(cluster.kubectl, package_namespace)
    return settings
