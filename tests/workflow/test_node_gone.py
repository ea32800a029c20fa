"""A Node deleted while its node workflow runs: the workflow ends cleanly with a ``gone`` result
(it used to fail its final status write with NotFound and retry the workflow task forever), and the
rollout treats the node as having left the fleet, not as a failure against ``maxFailedNodes: 0``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from temporalio import activity
from temporalio.client import Client

from fleetwright.activities.errors import to_application_error
from fleetwright.activities.payloads import NAMES, NodeStatusRequest, RecordStateRequest
from fleetwright.errors import NodeGoneError
from fleetwright.local import examples
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import NodeResult
from tests.support.rollouts import rollout_input, running, unique
from tests.support.waiting import until_fleet, until_phase
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow


@dataclass
class DeletingFleet(FakeFleet):
    """The fake fleet with the real activities' contract for a deleted Node: work on it fails with
    ``NodeGone``; showing status on it is done already."""

    @activity.defn(name=NAMES.RECORD_STATE)
    async def record_state(self, request: RecordStateRequest) -> None:
        if request.node not in self.nodes:
            raise to_application_error(NodeGoneError(f"node {request.node} does not exist"))
        await super().record_state(request)

    @activity.defn(name=NAMES.SET_NODE_STATUS)
    async def set_node_status(self, request: NodeStatusRequest) -> None:
        if request.node in self.nodes:
            await super().set_node_status(request)


async def test_a_node_deleted_mid_update_ends_its_workflow_as_gone_and_the_rollout_completes(
    client: Client,
) -> None:
    name = unique()
    fleet = DeletingFleet(size=2, hold_stages=True)
    rollout = rollout_input(examples.policy(max_unavailable=1, max_failed_nodes=0), name=name)
    async with running(client, fleet, rollout) as handle:
        await until_fleet(lambda: fleet.started_stages, "the first stage")
        canary = fleet.started_stages[0][0]
        del fleet.nodes[canary]  # deleted while its first stage runs
        fleet.hold_stages = False
        fleet.release.set()
        node = client.get_workflow_handle(node_workflow_id(name, canary), result_type=NodeResult)
        gone = await node.result()
        state = await until_phase(handle, "Complete", "Halted")
    assert gone.status is RunStatus.GONE
    assert "node deleted" in gone.message
    assert fleet.statuses[canary] == "InProgress"  # no Failed status: it left, it did not fail
    assert state.phase == "Complete", state
    assert state.failed == 0
    assert state.updated == 1
    assert [fleet.statuses[n] for n in fleet.nodes] == ["Complete"]
