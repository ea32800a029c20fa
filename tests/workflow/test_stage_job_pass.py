"""Each node workflow run is one pass over its node: it names its stage Jobs with its run id, so a
node run again at attempt 0 (``node reset``, drift re-applying the same target) gets fresh Jobs
instead of adopting the earlier pass's Complete ones, while an activity retry in the same run (the
same request) adopts its own."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import StageRequest
from fleetwright.local import examples
from fleetwright.stagejob.outcome import StageReport
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import NodeResult
from tests.support.rollouts import rollout_input, running, unique
from tests.support.waiting import until_fleet
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
    name = unique()
    fleet = RecordingFleet(size=1)
    node = next(iter(fleet.nodes))
    async with running(client, fleet, rollout_input(examples.policy(max_unavailable=1), name=name)):
        await until_fleet(lambda: fleet.requests, "the first stage")
        child = client.get_workflow_handle(node_workflow_id(name, node), result_type=NodeResult)
        await child.result()
        run_id = (await child.describe()).run_id
    assert run_id
    assert [r.stage.value for r in fleet.requests] == ["apply", "config", "interrupt", "post-interrupt"]
    assert {r.pass_id for r in fleet.requests} == {run_id}
