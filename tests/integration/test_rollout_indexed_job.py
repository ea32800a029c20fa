"""A gang run by the real Job controller (issue 46): an Indexed Job with one pod on each of 4 kwok
nodes, its pods carrying the controller's owner references, is recognised through its owner chain
and interrupted exactly once by a rollout that drains all 4 nodes; with the workload order off and
one node at a time, the same Job is interrupted once per node; a unit whose node is busy waits for
it, showing the wait as a condition on its other nodes, and is still interrupted once."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from fleetwright.local import examples
from tests.support.engine import kubectl_json
from tests.support.gangjobs import INDEXED_JOB, roll_over_gang, whole_gang_policy
from tests.support.providers import ClusterUnderTest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

GANG = 4


def failed(cluster: ClusterUnderTest, namespace: str) -> int:
    """The pods the Job controller counts as failed."""
    return int(kubectl_json(cluster, "job", "train", "-n", namespace)["status"].get("failed", 0))


async def test_an_indexed_job_over_four_nodes_is_interrupted_once(
    cluster: ClusterUnderTest, temporal_client: Client, gang_engine: str
) -> None:
    policy = whole_gang_policy(GANG)
    namespace, seen = await roll_over_gang(cluster, temporal_client, gang_engine, policy, INDEXED_JOB, GANG)
    # Through the pods' owner chain (Pod -> Job): no label names the workload.
    assert list(seen.workloads.values()) == [{f"Job/{namespace}/train"}] * GANG, seen.workloads
    assert len(seen.episodes) == 1, seen.episodes
    assert sum(len(pods) for pods in seen.episodes.values()) == GANG, seen.episodes
    assert failed(cluster, namespace) == GANG


async def test_a_unit_waits_for_its_busy_node_shows_it_on_its_nodes_and_is_interrupted_once(
    cluster: ClusterUnderTest, temporal_client: Client, gang_engine: str
) -> None:
    policy = whole_gang_policy(GANG)
    _, seen = await roll_over_gang(
        cluster, temporal_client, gang_engine, policy, INDEXED_JOB, GANG, busy=True
    )
    assert len(seen.episodes) == 1, seen.episodes
    assert sum(len(pods) for pods in seen.episodes.values()) == GANG, seen.episodes


async def test_without_the_workload_order_the_same_job_is_interrupted_per_node(
    cluster: ClusterUnderTest, temporal_client: Client, gang_engine: str
) -> None:
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]
    policy = examples.policy(max_unavailable=1, steps=steps, workload_order=False)
    namespace, seen = await roll_over_gang(cluster, temporal_client, gang_engine, policy, INDEXED_JOB, GANG)
    assert len(seen.episodes) == GANG, seen.episodes
    assert all(len(pods) == 1 for pods in seen.episodes.values()), seen.episodes
    assert failed(cluster, namespace) == GANG
