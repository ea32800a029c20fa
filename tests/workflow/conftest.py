"""The workflow tier's client: the time-skipping test server's, with the pydantic data converter
the worker and the controller use."""

from __future__ import annotations

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment


@pytest.fixture
async def client(time_skipping_env: WorkflowEnvironment) -> Client:
    config = time_skipping_env.client.config()
    config["data_converter"] = pydantic_data_converter
    return Client(**config)
