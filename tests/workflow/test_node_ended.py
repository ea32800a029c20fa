"""A node workflow that ends without finishing (terminated in the Temporal UI, timed out) frees
what it held: its rollout counts the node as failed and shows it so, which drops its start claim,
and another profile that counted the claim against its budget then proceeds. The look-up activity
itself: a running workflow is left out, a completed one's result is read back (its report to the
rollout was lost), any other end is a failure naming it."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from fleetwright.activities.payloads import (
    EndedNodes,
    EndedNodesRequest,
    NodeResult,
    StartNodesRequest,
    WorkflowStart,
)
from fleetwright.activities.starts import NodeStarter
from fleetwright.api.keys import NodeReason, claim_key
from fleetwright.local import examples
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.node import NODE_WORKFLOW
from fleetwright.workflows.payloads import Progress, RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.waiting import until, until_fleet, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

# The rollouts look up their running nodes' workflows once per observe interval.
SETTINGS = EngineSettings(observe_interval_seconds=1, ended_check_seconds=1, search_attributes=False)
ONE_AT_A_TIME = [{"name": "all", "batches": {"strategy": "fixed", "initial": 1}}]


Rollout = WorkflowHandle[RolloutWorkflow, Progress]


async def test_a_terminated_node_workflow_fails_its_node_and_frees_its_claim_for_other_profiles(
    client: Client,
) -> None:
    fleet = FakeFleet(size=2)
    first, second = (f"tuning-{uuid.uuid4().hex[:8]}" for _ in range(2))
    fleet.held_profiles = {first}  # the first profile's stage never ends by itself
    policy = examples.policy(max_unavailable=1, steps=ONE_AT_A_TIME)
    queue = f"tq-{uuid.uuid4()}"

    async def start(profile: str) -> Rollout:
        rollout = RolloutInput(
            profile=examples.profile(profile, interrupt=None), policy=policy, settings=SETTINGS
        )
        return await client.start_workflow(
            RolloutWorkflow.run, rollout, id=f"nodeprofile/{profile}", task_queue=queue
        )

    async with build_worker(client, fleet.activities(), task_queue=queue):
        one = await start(first)
        await until_fleet(lambda: bool(fleet.started_stages), "the first profile's stage", within=60.0)
        [(node, _)] = fleet.started_stages
        assert claim_key(first) in fleet.annotations(node)

        # The second profile counts the claimed node against its budget of one: it waits.
        two = await start(second)
        held = await until_progress(two, lambda p: bool(p.blocked_reasons), "the budget held by the claim")
        assert f"{node} (profile/{first} starting)" in str(held.blocked_reasons)

        await client.get_workflow_handle(node_workflow_id(first, node)).terminate("an operator")
        failed = await until_progress(one, lambda p: bool(p.failed_nodes), "the node failed")
        assert failed.failed_nodes == (node,)
        assert "terminated" in failed.failed_reasons[node]
        # Shown on the node (the second profile may already be updating it: it was freed).
        assert (first, node, NodeReason.WORKFLOW_ENDED) in fleet.shown
        assert claim_key(first) not in fleet.annotations(node)

        done = await until_progress(two, lambda p: p.phase == "Complete", "the second profile complete")
        assert done.phase == "Complete"
        assert {n for n, _ in fleet.started_stages[1:]} == set(fleet.nodes)
        fleet.release.set()  # the terminated workflow's stage activity may end now
        for handle in (one, two):
            await handle.terminate("test done")


async def test_a_node_left_running_for_the_previous_spec_is_freed_when_its_workflow_is_terminated(
    client: Client,
) -> None:
    # A new spec arrives while a node runs the previous one: the node keeps its budget until its
    # workflow ends. Terminated, that workflow never reports; the rollout must find that out, not
    # hold the node (and its claim) forever, and then update it to the new spec.
    fleet = FakeFleet(size=1)
    name = f"tuning-{uuid.uuid4().hex[:8]}"
    fleet.held_profiles = {name}
    policy = examples.policy(max_unavailable=1, steps=ONE_AT_A_TIME)
    queue = f"tq-{uuid.uuid4()}"
    rollout = RolloutInput(profile=examples.profile(name, interrupt=None), policy=policy, settings=SETTINGS)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        handle = await client.start_workflow(
            RolloutWorkflow.run, rollout, id=f"nodeprofile/{name}", task_queue=queue
        )
        await until_fleet(lambda: bool(fleet.started_stages), "the first stage", within=60.0)
        [(node, _)] = fleet.started_stages
        upgrade = examples.profile(name, interrupt=None, version="1.1.0", generation=2)
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=upgrade, policy=policy))
        await until_progress(handle, lambda p: p.generation == 2, "the new spec")
        await client.get_workflow_handle(node_workflow_id(name, node)).terminate("an operator")
        await until_fleet(
            lambda: len(fleet.started_stages) == 2, "the node started for the new spec", within=90
        )
        fleet.release.set()
        done = await until_progress(handle, lambda p: p.phase == "Complete", "Complete")
        await handle.terminate("test done")
    assert done.generation == 2


@workflow.defn(name="test.finished-node", sandboxed=False)
class FinishedNode:
    """Stands in for a node workflow that completed with a result."""

    @workflow.run
    async def run(self, result: NodeResult) -> NodeResult:
        return result


async def test_the_look_up_reads_back_results_and_names_how_a_workflow_ended(client: Client) -> None:
    starter = NodeStarter()
    env = ActivityEnvironment(client=client)
    prefix = f"node/{uuid.uuid4().hex[:8]}/"

    async def start(*nodes: str) -> None:
        starts = tuple(WorkflowStart(id=prefix + n, input={"node": n}) for n in nodes)
        epoch = datetime.fromtimestamp(0, UTC)
        request = StartNodesRequest(
            workflow=NODE_WORKFLOW, task_queue="no-worker", decided_at=epoch, starts=starts
        )
        await env.run(starter.start_nodes, request)

    # A run that ended before the rollout decided to start the node again is a previous one.
    await start("previous")
    await client.get_workflow_handle(prefix + "previous").terminate("an earlier attempt")
    await asyncio.sleep(0.1)
    decided = datetime.now(UTC)
    await asyncio.sleep(0.1)
    await start("running", "terminated", "previous")
    await client.get_workflow_handle(prefix + "terminated").terminate("an operator")
    result = NodeResult(node="completed", target="t1", status=RunStatus.SUCCEEDED, message="complete")
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[FinishedNode]):
        await client.execute_workflow(FinishedNode.run, result, id=prefix + "completed", task_queue=queue)
    nodes = ("running", "terminated", "completed", "previous", "never-started")
    request = EndedNodesRequest(id_prefix=prefix, waiting=dict.fromkeys(nodes, decided), target="t1")

    # The visibility store is eventually consistent: the ends show within moments.
    async def both_shown() -> EndedNodes | None:
        ended: EndedNodes = await env.run(starter.ended_nodes, request)
        return ended if ended.finished and ended.unfinished else None

    ended = await until(both_shown, 10.0, "a finished and an unfinished node shown", interval=0.1)
    assert ended.finished == (result,)  # the running one, and the previous run, are left out
    [terminated] = ended.unfinished
    assert (terminated.node, terminated.status, terminated.target) == ("terminated", RunStatus.FAILED, "t1")
    assert "terminated" in terminated.message
    assert "retry-node" in terminated.message

    # Nodes running for an earlier target: found ended by having no open run, whenever it began.
    earlier = EndedNodesRequest(
        id_prefix=prefix, waiting={}, target="t2", earlier=("running", "terminated", "never-started")
    )
    ended = await env.run(starter.ended_nodes, earlier)
    assert ended.finished == ()
    assert [(r.node, r.status, r.target) for r in ended.unfinished] == [
        ("terminated", RunStatus.FAILED, "t2")
    ]
