"""The activity that starts a decision's node workflows, on the test server: every start of the
request begins; starting again leaves a running workflow as it is; a retried attempt leaves alone
a run begun since the decision, even one that has finished since; a later decision starts a
finished node's workflow afresh, and waits for a run still open from an earlier pass to close
instead of taking it for its own."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities import starts
from fleetwright.activities.payloads import StartNodesRequest, WorkflowStart
from fleetwright.activities.starts import NodeStarter
from fleetwright.workflows.node import NODE_WORKFLOW

pytestmark = pytest.mark.workflow


EPOCH = datetime.fromtimestamp(0, UTC)


def request(decided_at: datetime, *ids: str) -> StartNodesRequest:
    return StartNodesRequest(
        workflow=NODE_WORKFLOW,
        task_queue="no-worker",  # nothing runs them: the test looks at the starts alone
        decided_at=decided_at,
        starts=tuple(
            WorkflowStart(id=i, input={"node": i}, summary=f"{i}: apply", details=f"**Node** `{i}`")
            for i in ids
        ),
    )


async def run_id(client: Client, workflow_id: str) -> str:
    described = await client.get_workflow_handle(workflow_id).describe()
    return described.run_id


async def test_starts_are_idempotent_within_a_decision_and_fresh_for_the_next(
    client: Client,
) -> None:
    starter = NodeStarter()
    first = ActivityEnvironment(client=client)

    assert await first.run(starter.start_nodes, request(EPOCH, "node/p/a", "node/p/b")) == 2
    runs = {i: await run_id(client, i) for i in ("node/p/a", "node/p/b")}
    # The UI's summary and details of each node workflow ride with its start.
    described = await client.get_workflow_handle("node/p/a").describe()
    assert (await described.static_summary(), await described.static_details()) == (
        "node/p/a: apply",
        "**Node** `node/p/a`",
    )
    # The same attempt again (a duplicate delivery): both still run, none began again.
    assert await first.run(starter.start_nodes, request(EPOCH, "node/p/a", "node/p/b")) == 2
    assert {i: await run_id(client, i) for i in runs} == runs

    await client.get_workflow_handle("node/p/a").terminate("finished")
    began = (await client.get_workflow_handle("node/p/a").describe()).start_time
    decided = began - timedelta(seconds=1)
    retry = ActivityEnvironment(client=client)
    retry.info = dataclasses.replace(retry.info, attempt=2)
    # A retried attempt of that decision: a finished since, b still running; neither begins again.
    assert await retry.run(starter.start_nodes, request(decided, "node/p/a", "node/p/b")) == 0
    assert {i: await run_id(client, i) for i in runs} == runs

    # The next decision names a again: its finished workflow begins afresh.
    assert await first.run(starter.start_nodes, request(began + timedelta(hours=1), "node/p/a")) == 1
    assert await run_id(client, "node/p/a") != runs["node/p/a"]


async def test_a_run_still_open_from_an_earlier_pass_is_waited_for_then_begun_afresh(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An earlier pass's node workflow reported and is closing when the next decision names its node
    # again: the start must not take that run for the new one (its work would never run).
    starter = NodeStarter()
    env = ActivityEnvironment(client=client)
    assert await env.run(starter.start_nodes, request(EPOCH, "node/p/c")) == 1
    earlier = await run_id(client, "node/p/c")
    decided = datetime.now(UTC) + timedelta(seconds=1)

    async def close_soon() -> None:
        await asyncio.sleep(1.5)
        await client.get_workflow_handle("node/p/c").terminate("reported; closing")

    closing = asyncio.create_task(close_soon())
    assert await env.run(starter.start_nodes, request(decided, "node/p/c")) == 1
    await closing
    assert await run_id(client, "node/p/c") != earlier

    # One that does not close fails the attempt, naming it, and begins nothing.
    monkeypatch.setattr(starts, "EARLIER_RUN_CLOSE_SECONDS", 1.0)
    stuck = await run_id(client, "node/p/c")
    later = datetime.now(UTC) + timedelta(seconds=1)
    with pytest.raises(ApplicationError, match="node/p/c of an earlier pass is still running"):
        await env.run(starter.start_nodes, request(later, "node/p/c"))
    assert await run_id(client, "node/p/c") == stuck
