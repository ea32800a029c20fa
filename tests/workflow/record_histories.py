"""Records the histories the replay test checks: run with
``.venv/bin/python -m tests.workflow.record_histories`` after a deliberate workflow change, and
commit the JSON files (CONTRIBUTING.md, "Workflow changes": before the first release a change
replaces the histories; after it, a change that breaks replay is a patch with an end)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fleetwright.binaries import wheel_binary
from fleetwright.localcluster import examples
from fleetwright.worker.process import run_and_exit
from fleetwright.worker.temporal import build_worker
from fleetwright.workflows.node import node_workflow_id
from fleetwright.workflows.payloads import EngineSettings, RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.workflow.fakefleet import FakeFleet

HISTORIES = Path(__file__).parent / "histories"


async def until(predicate: Callable[[], bool]) -> None:
    for _ in range(600):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("the recorded scenario did not progress")


async def _save(handle: WorkflowHandle[Any, Any], name: str) -> None:
    history = await handle.fetch_history()
    (HISTORIES / f"{name}.json").write_text(history.to_json())


async def record() -> None:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(wheel_binary("temporal-test-server"))
    )
    config = env.client.config()
    config["data_converter"] = pydantic_data_converter
    client = Client(**config)
    fleet = FakeFleet(size=3)
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "gate", "approval": {}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
    ]
    rollout = RolloutInput(
        profile=examples.profile(name="replay"),
        policy=examples.policy(max_unavailable=2, steps=steps),
        settings=EngineSettings(search_attributes=False),
    )
    async with build_worker(client, fleet.activities(), task_queue="replay"):
        handle = await client.start_workflow(
            RolloutWorkflow.run, rollout, id="nodeprofile/replay", task_queue="replay"
        )
        await until(lambda: "Complete" in fleet.statuses.values())
        await env.sleep(86400)
        await handle.execute_update(RolloutWorkflow.approve, "rollout/gate")
        await until(lambda: list(fleet.statuses.values()).count("Complete") == 3)
        await handle.signal(RolloutWorkflow.abort)
        await handle.result()
        await _save(handle, "rollout-canary-gate-approve-abort")
        node = fleet.started_nodes()[0]
        await _save(client.get_workflow_handle(node_workflow_id("replay", node)), "node-reboot-complete")
    await env.shutdown()


def main() -> None:
    HISTORIES.mkdir(exist_ok=True)
    asyncio.run(record())


if __name__ == "__main__":
    # The SDK runtime's threads outlive the environment: end as the fleetwright commands do, without
    # the interpreter finalization they can abort.
    run_and_exit(main)
