"""Batch rules end to end on the workflow tier: a batch fails below ``batchThreshold`` percent of
its nodes succeeding, a failed batch shrinks the next one while progress is below ``safetyLimit``,
``failure.failureThreshold`` consecutive failed batches halt the rollout however many failed nodes
``maxFailedNodes`` tolerates, and ``resetBatchStateOnCompletion`` decides where the next rollout's
batches start."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.payloads import Progress, RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import SETTINGS, halted, start, unique
from tests.support.waiting import until_progress
from tests.workflow.fakefleet import FakeFleet

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


def ramp(*, reset: bool) -> DeploymentPolicy:
    steps = [
        {
            "name": "rest",
            "batches": {
                "strategy": "exponential",
                "initial": 1,
                "soakSeconds": 600,
                "resetBatchStateOnCompletion": reset,
            },
        }
    ]
    return examples.policy(max_unavailable=10, steps=steps)


def next_pause_or_complete(after: str) -> Callable[[Progress], bool]:
    """Complete, or a pause between batches other than ``after`` (each names when it ends)."""
    return lambda p: p.phase == "Complete" or ("pause between batches" in p.message and p.message != after)


@pytest.mark.parametrize(("reset", "first_batch"), [(True, 1), (False, 6)])
async def test_the_next_rollout_starts_its_batches_from_initial_or_from_where_the_last_one_ended(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment, reset: bool, first_batch: int
) -> None:
    # Six nodes, exponential from 1, ten minutes between batches: the first rollout runs batches of
    # 1, 2 and 3 (the rest). The next one starts from 1 again, or (no reset) from the last batch
    # grown: 3 x 2, so all six at once.
    fleet = FakeFleet(size=6)
    name = unique()
    policy = ramp(reset=reset)
    rollout = RolloutInput(profile=examples.profile(name=name), policy=policy, settings=SETTINGS)
    handle, queue = await start(skipping_client, fleet, rollout)
    async with build_worker(skipping_client, fleet.activities(), task_queue=queue):
        paused = ""
        for _ in range(3):  # two pauses, then Complete
            shown = await until_progress(
                handle,
                next_pause_or_complete(after=paused),
                "the next batch",
            )
            if shown.phase == "Complete":
                break
            paused = shown.message
            await time_skipping_env.sleep(timedelta(minutes=10))
        assert shown.phase == "Complete", shown
        fleet.started_stages.clear()
        upgrade = examples.profile(name=name, version="1.1.0", generation=2)
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=upgrade, policy=policy))
        shown = await until_progress(
            handle,
            lambda p: p.generation == 2 and (p.phase == "Complete" or "pause between batches" in p.message),
            "the next rollout's first batch",
        )
        await handle.terminate("test done")
    assert len(fleet.started_nodes()) == first_batch, (shown, fleet.started_nodes())
    assert (shown.phase == "Complete") is (first_batch == 6), shown
