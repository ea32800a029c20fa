"""The Temporal dev server runs from the wheel with persistence, the UI and search attributes."""

from __future__ import annotations

import asyncio
import urllib.request
import uuid

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The sandbox re-imports this module to validate the workflow; the launcher is not workflow code.
with workflow.unsafe.imports_passed_through():
    from fleetwright.local.temporalserver import LocalTemporal

pytestmark = pytest.mark.integration


@workflow.defn(name="test.echo")
class EchoWorkflow:
    @workflow.run
    async def run(self, text: str) -> str:
        return text


def http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as response:
        return int(response.status)


async def test_dev_server_runs_workflows_and_serves_the_ui(
    temporal_server: LocalTemporal, temporal_client: Client
) -> None:
    async with Worker(temporal_client, task_queue="tq-echo", workflows=[EchoWorkflow]):
        result = await temporal_client.execute_workflow(
            EchoWorkflow.run, "hello", id=f"echo-{uuid.uuid4()}", task_queue="tq-echo"
        )
    assert result == "hello"
    assert await asyncio.to_thread(http_status, temporal_server.ui_url) == 200
    assert temporal_server.workdir is not None
    assert (temporal_server.workdir / "temporal.sqlite").exists()


async def test_history_survives_a_server_kill(tmp_path_factory: pytest.TempPathFactory) -> None:
    with LocalTemporal(ui=False, workdir=tmp_path_factory.mktemp("temporal")) as server:
        client = await Client.connect(server.address)
        workflow_id = f"echo-{uuid.uuid4()}"
        async with Worker(client, task_queue="tq-kill", workflows=[EchoWorkflow]):
            await client.execute_workflow(EchoWorkflow.run, "kept", id=workflow_id, task_queue="tq-kill")
        server.restart()  # SIGKILL, then start on the same sqlite file
        client = await Client.connect(server.address)
        assert await client.get_workflow_handle(workflow_id).result() == "kept"
