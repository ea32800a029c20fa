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
from fleetwright.planner.nodestate import NodePackageState, PackageRecord, format_annotation
from fleetwright.planner.packages import config_digests
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
    await _record_rollback(client)
    await env.shutdown()


async def _record_rollback(client: Client) -> None:
    """1.0.0 -> 1.1.0 on three nodes whose canary fails: the rollout rolls it back, then is aborted."""
    fleet = FakeFleet(size=3)
    old = examples.profile(name="replay", version="1.0.0", generation=1)
    config = config_digests(old.spec.packages[0].config_map)
    for node in fleet.nodes:
        state = NodePackageState(
            profile="replay", packages={"tuning": PackageRecord(version="1.0.0", config=config)}
        )
        key, value = format_annotation(state)
        fleet.annotations(node)[key] = value
    fleet.fails = lambda request: request.package.version == "1.1.0"
    policy = examples.policy(max_unavailable=2)
    failure = policy.spec.failure.model_copy(update={"action": "rollback"})
    rollout = RolloutInput(
        profile=examples.profile(name="replay", version="1.1.0", generation=2),
        policy=policy.model_copy(update={"spec": policy.spec.model_copy(update={"failure": failure})}),
        previous=old,
        settings=EngineSettings(search_attributes=False),
    )
    async with build_worker(client, fleet.activities(), task_queue="replay-rollback"):
        handle = await client.start_workflow(
            RolloutWorkflow.run, rollout, id="nodeprofile/replay", task_queue="replay-rollback"
        )
        await until(lambda: any(r.package.version == "1.0.0" for r in fleet.stage_requests))
        await until(lambda: "Complete" in fleet.statuses.values())
        await handle.signal(RolloutWorkflow.abort)
        await handle.result()
        await _save(handle, "rollout-rollback-abort")


def main() -> None:
    HISTORIES.mkdir(exist_ok=True)
    asyncio.run(record())


if __name__ == "__main__":
    # The SDK runtime's threads outlive the environment: end as the fleetwright commands do, without
    # the interpreter finalization they can abort.
    run_and_exit(main)
