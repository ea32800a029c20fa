"""Each node workflow run is one pass over its node: it names its stage Jobs with its run id, so a
node run again at attempt 0 (``node reset``, drift re-applying the same target) gets fresh Jobs
instead of adopting the earlier pass's Complete ones, while an activity retry in the same run (the
same request) adopts its own."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import StageRequest
from fleetwright.local import examples
from fleetwright.stagejob.outcome import StageReport
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import NodeResult, RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow


@dataclass
class RecordingFleet(FakeFleet):
    requests: list[StageRequest] = field(default_factory=list)

    async def run_stage(self, request: StageRequest) -> StageReport:
        self.requests.append(request)
        return await super().run_stage(request)


async def test_the_stage_jobs_of_a_node_workflow_are_named_for_its_run(
    client: Client,
) -> None:
    name = f"tuning-{uuid.uuid4().hex[:8]}"
    fleet = RecordingFleet(size=1)
    node = next(iter(fleet.nodes))
    rollout = RolloutInput(
        profile=examples.profile(name=name),
        policy=examples.policy(max_unavailable=1),
        settings=EngineSettings(observe_interval_seconds=60, search_attributes=False),
    )
    queue = f"tq-{uuid.uuid4()}"
    handle = await client.start_workflow(
        RolloutWorkflow.run, rollout, id=f"nodeprofile/{name}", task_queue=queue
    )
    async with build_worker(client, fleet.activities(), task_queue=queue):
        while True:
            if fleet.requests:
                break
            await asyncio.sleep(0.05)
        child = client.get_workflow_handle(node_workflow_id(name, node), result_type=NodeResult)
        await child.result()
        run_id = (await child.describe()).run_id
        await handle.terminate("test done")
    assert run_id
    assert [r.stage.value for r in fleet.requests] == ["apply", "config", "interrupt", "post-interrupt"]
    assert {r.pass_id for r in fleet.requests} == {run_id}
