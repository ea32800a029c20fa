"""The node activities' tests share one activity object and one pool of kwok nodes (each test takes
its own from it), and get a namespace of their own each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwright.activities.node import NodeActivities
from fleetwright.kube import client as kube_client
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import wait_for


@pytest.fixture(scope="package")
def activities(cluster: ClusterUnderTest) -> NodeActivities:
    return NodeActivities(kube_client.from_kubeconfig(cluster.kubeconfig))


@pytest.fixture(scope="package")
def spare_nodes(cluster: ClusterUnderTest) -> Iterator[str]:
    """A pool of these tests' own kwok nodes, handed out one per use."""
    return iter(cluster.add_nodes(26))


@pytest.fixture
def namespace(cluster: ClusterUnderTest, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"a-{request.node.name.replace('_', '-')[:40].lower()}".rstrip("-")
    cluster.kubectl("create", "namespace", name)
    wait_for(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        what="default service account",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")
