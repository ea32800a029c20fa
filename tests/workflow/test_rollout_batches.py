"""Batch failure rules end to end on the workflow tier: a batch fails below ``batchThreshold``
percent of its nodes succeeding, a failed batch shrinks the next one while progress is below
``safetyLimit``, and ``failure.failureThreshold`` consecutive failed batches halt the rollout
however many failed nodes ``maxFailedNodes`` tolerates."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.localcluster import examples
from fleetwright.worker.temporal import build_worker
from fleetwright.workflows.payloads import RolloutInput
from tests.workflow.fakefleet import FakeFleet
from tests.workflow.test_rollout_workflow import SETTINGS, halted, start, unique

pytestmark = pytest.mark.workflow


def batch_rules() -> DeploymentPolicy:
    deployment = examples.policy(max_unavailable=10)  # failed nodes stay cordoned: keep the cap out of it
    rules = {
        "steps": [
            {
                "name": "rest",
                "batches": {
                    "strategy": "exponential",
                    "initial": 2,
                    "growthFactor": 2,
                    "batchThreshold": 50,
                    "safetyLimit": 90,
                },
            }
        ],
        "failure": {"maxFailedNodes": 10, "failureThreshold": 2},
    }
    spec = deployment.spec.model_validate({**deployment.spec.model_dump(by_alias=True), **rules})
    return deployment.model_copy(update={"spec": spec})


async def test_consecutive_failed_batches_halt_at_the_failure_threshold(client: Client) -> None:
    fleet = FakeFleet(size=10)
    order: list[str] = []
    # In start order: batch 1 (2 nodes) loses one, which batchThreshold 50 still passes, so batch
    # 2 grows to 4; three of those fail (a failed batch, at 60% progress, below safetyLimit 90),
    # so batch 3 shrinks to 2, and both fail: the second failed batch in a row.
    failing = {1, 3, 4, 5, 6, 7}

    def fails(request: StageRequest) -> bool:
        if request.node not in order:
            order.append(request.node)
        return order.index(request.node) in failing

    fleet.fails = fails
    rollout = RolloutInput(profile=examples.profile(name=unique()), policy=batch_rules(), settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        stopped = await halted(handle)
        await handle.terminate("test done")
    assert "2 consecutive failed batches (failureThreshold 2)" in stopped.message, stopped.message
    assert len(order) == 8, order  # 2 + 4 + 2: no node after the halt
    assert stopped.failed == 6
