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

    def pool() -> Iterator[str]:
        yield from cluster.add_nodes(32)  # what these tests take, added at once
        while True:  # a test added later never finds the pool empty
            yield from cluster.add_nodes(4)

    return pool()


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
