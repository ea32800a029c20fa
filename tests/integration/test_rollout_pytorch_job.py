"""A gang run by the Kubeflow training operator (issue 46): a PyTorchJob of one master and three
workers, one pod on each of 4 kwok nodes, its pods created by the operator with their real owner
references (Pod -> PyTorchJob, ``kubeflow.org/v1``), is recognised through that owner and
interrupted exactly once by a rollout that drains all 4 nodes (counted from the API)."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from fleetwright.local.trainingoperator import TrainingOperator
from tests.support.gangjobs import PYTORCH_JOB, roll_over_gang, whole_gang_policy
from tests.support.providers import ClusterUnderTest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

GANG = 4


async def test_a_pytorch_job_over_four_nodes_is_interrupted_once(
    cluster: ClusterUnderTest, temporal_client: Client, gang_engine: str, training_operator: TrainingOperator
) -> None:
    policy = whole_gang_policy(GANG)
    namespace, seen = await roll_over_gang(cluster, temporal_client, gang_engine, policy, PYTORCH_JOB, GANG)
    # Through the owner the operator wrote (Pod -> PyTorchJob), before its job-name label.
    assert list(seen.workloads.values()) == [{f"PyTorchJob/{namespace}/train"}] * GANG, seen.workloads
    assert len(seen.episodes) == 1, seen.episodes
    assert sum(len(pods) for pods in seen.episodes.values()) == GANG, seen.episodes
