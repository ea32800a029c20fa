"""The workflow tier's servers and clients, with the pydantic data converter the worker and the
controller use.

``client`` talks to a real Temporal server (an in-memory dev server started once for the tier):
tests that drive a workflow with signals and fake activities run there. The time-skipping test
server refuses a workflow task that cancels a timer which fired while the task was with the
worker ("invalid history builder state for action", temporalio/sdk-java#3088) and never hands the
task out again, so the run is stranded. A ``wait_condition`` with a timeout that a signal wakes at
the instant its timer fires does exactly that (the rollout's pacing wait and a ``delete`` signal,
for one); the real server drops the fired timer's buffered event and completes the task.

``skipping_client`` talks to the time-skipping test server (``time_skipping_env``), for the tests
that make days pass in seconds with ``time_skipping_env.sleep``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fleetwright.binaries import wheel_binary


@pytest.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=str(wheel_binary("temporal")),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def client(dev_env: WorkflowEnvironment) -> Client:
    return dev_env.client


@pytest.fixture
async def skipping_client(time_skipping_env: WorkflowEnvironment) -> Client:
    config = time_skipping_env.client.config()
    config["data_converter"] = pydantic_data_converter
    return Client(**config)
