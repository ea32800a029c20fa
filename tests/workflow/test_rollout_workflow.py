"""The rollout and node workflows on the time-skipping server, over an in-memory fleet."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from fleetwright.activities.payloads import NAMES, DecideReport, DecideRequest, DrainReport, DrainRequest
from fleetwright.api.keys import condition_type, cordon_key, state_key
from fleetwright.local import examples
from fleetwright.planner.nodestate import read_profile_state
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import Progress, RolloutInput, SpecChange
from fleetwright.workflows.rollout import ABORTED, RolloutWorkflow
from tests.support.waiting import query_progress, until, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

SETTINGS = EngineSettings(observe_interval_seconds=60, search_attributes=False)


def unique() -> str:
    """A profile name per test, so node workflow ids never collide across tests."""
    return f"tuning-{uuid.uuid4().hex[:8]}"


async def start(
    client: Client, fleet: FakeFleet, rollout: RolloutInput
) -> tuple[WorkflowHandle[RolloutWorkflow, Progress], str]:
    queue = f"tq-{uuid.uuid4()}"
    handle = await client.start_workflow(
        RolloutWorkflow.run,
        rollout,
        id=f"nodeprofile/{rollout.profile.metadata.name}-{uuid.uuid4()}",
        task_queue=queue,
    )
    return handle, queue


async def progress(handle: WorkflowHandle[RolloutWorkflow, Progress]) -> Progress:
    result = await query_progress(handle)
    assert result is not None
    return result


async def in_phase(handle: WorkflowHandle[RolloutWorkflow, Progress], phase: str) -> Progress:
    return await until_progress(handle, lambda state: state.phase == phase, phase)


async def halted(handle: WorkflowHandle[RolloutWorkflow, Progress]) -> Progress:
    return await in_phase(handle, "Halted")


async def test_a_rollout_completes_with_canary_first_and_the_cap_held(client: Client) -> None:
    fleet = FakeFleet(size=7)
    rollout = RolloutInput(
        profile=examples.profile(name=unique()),
        policy=examples.policy(max_unavailable=2),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: len(fleet.statuses) == 7 and set(fleet.statuses.values()) == {"Complete"},
            30.0,
            "all nodes",
            interval=0.05,
            blocking=False,
        )
        state = await progress(handle)
        while state.phase != "Complete":
            await asyncio.sleep(0.1)
            state = await progress(handle)
        await handle.terminate("test done")
    assert state.updated == 7
    assert fleet.max_cordoned <= 2
    assert not fleet.cordoned()
    first_node = fleet.started_stages[0][0]
    assert all(node == first_node for node, _ in fleet.started_stages[:3])  # apply, config, reboot: canary
    assert [stage for node, stage in fleet.started_stages if node == first_node] == [
        "apply",
        "config",
        "interrupt",
        "post-interrupt",
    ]


async def test_a_canary_gate_holds_for_seven_days_and_resumes_on_approve(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    client = skipping_client
    fleet = FakeFleet(size=4)
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "gate", "approval": {}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 3}},
    ]
    rollout = RolloutInput(
        profile=examples.profile(name=unique()),
        policy=examples.policy(max_unavailable=3, steps=steps),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: "Complete" in fleet.statuses.values(), 30.0, "the canary", interval=0.05, blocking=False
        )
        await time_skipping_env.sleep(timedelta(days=7))
        held = await progress(handle)
        assert held.updated == 1
        assert "awaiting approval rollout/gate" in held.message
        assert fleet.started_nodes() == sorted(fleet.statuses)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(RolloutWorkflow.approve, "rollout/nonsense")
        assert "unknown approval step 'rollout/nonsense'; this policy has: rollout/gate" in str(
            refused.value.cause
        )
        await handle.execute_update(RolloutWorkflow.approve, "rollout/gate")
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 4,
            30.0,
            "the rest",
            interval=0.05,
            blocking=False,
        )
        await handle.terminate("test done")


async def test_pause_mid_batch_starts_no_new_node_until_resume(client: Client) -> None:
    fleet = FakeFleet(size=6, hold_stages=True)
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}]
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt=None),
        policy=examples.policy(max_unavailable=2, steps=steps),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: len(fleet.started_nodes()) == 2, 30.0, "the first batch", interval=0.05, blocking=False
        )
        await handle.signal(RolloutWorkflow.pause)
        await in_phase(handle, "Paused")
        fleet.release.set()
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 2,
            30.0,
            "the batch to finish",
            interval=0.05,
            blocking=False,
        )
        # The turn that folds in both reports decides under the pause: nothing new starts.
        paused = await until_progress(handle, lambda state: state.updated == 2, "the batch's reports")
        assert paused.phase == "Paused"
        assert len(fleet.started_nodes()) == 2
        await handle.signal(RolloutWorkflow.resume)
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 6,
            30.0,
            "the rest after resume",
            interval=0.05,
            blocking=False,
        )
        await handle.terminate("test done")


@dataclass
class HeldDecideFleet(FakeFleet):
    """The first observe-and-decide call plans its turn, then waits for ``decided`` to be released,
    so a test can deliver a signal while the activity is in flight."""

    deciding: asyncio.Event = field(default_factory=asyncio.Event)
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    requests: list[DecideRequest] = field(default_factory=list)

    @activity.defn(name=NAMES.OBSERVE_AND_DECIDE)
    async def observe_and_decide(self, request: DecideRequest) -> DecideReport:
        self.requests.append(request)
        report = await super().observe_and_decide(request)
        if len(self.requests) == 1:
            self.deciding.set()
            await self.decided.wait()
        return report


async def node_starts_commanded(handle: WorkflowHandle[RolloutWorkflow, Progress]) -> int:
    """Node workflow starts the rollout asked for (its start activities)."""
    history = await handle.fetch_history()
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == NAMES.START_NODES
    )


@pytest.mark.parametrize("control", ["pause", "abort"])
async def test_a_pause_or_abort_received_while_deciding_starts_none_of_that_decisions_nodes(
    client: Client, control: str
) -> None:
    fleet = HeldDecideFleet(size=4)
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}]
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt=None),
        policy=examples.policy(max_unavailable=2, steps=steps),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await fleet.deciding.wait()
        await handle.signal(control)  # recorded in history before the activity completes
        fleet.decided.set()
        # The turn ends by publishing its progress, after any start it made.
        wanted = ABORTED if control == "abort" else "Paused"
        for _ in range(300):
            state = await query_progress(handle)
            if state is not None and state.phase == wanted:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the rollout never reported {wanted}")
        # The held decision would have started two nodes; the one taken under the control none.
        assert not fleet.requests[0].controls.paused
        assert not fleet.requests[0].controls.aborted
        assert await node_starts_commanded(handle) == 0
        assert fleet.started_nodes() == []
        if control == "pause":
            await handle.signal(RolloutWorkflow.resume)
            await until(
                lambda: list(fleet.statuses.values()).count("Complete") == 4,
                30.0,
                "all after resume",
                interval=0.05,
                blocking=False,
            )
            await handle.terminate("test done")


@dataclass
class PdbHeldFleet(FakeFleet):
    """The drain of every node is held by a PodDisruptionBudget until ``release`` is set: it shows
    that on the node's condition for the profile, as the real drain activity does."""

    draining: asyncio.Event = field(default_factory=asyncio.Event)

    @activity.defn(name=NAMES.DRAIN)
    async def drain(self, request: DrainRequest) -> DrainReport:
        conditions = self.nodes[request.node]["status"]["conditions"]
        held = {
            "type": condition_type(request.profile),
            "status": "False",
            "reason": "DrainBlocked",
            "message": f"drain of {request.node}: default/trainer-0: PodDisruptionBudget trainer-pdb",
        }
        conditions.append(held)
        self.draining.set()
        await self.release.wait()
        conditions.remove(held)
        return DrainReport()


async def test_a_node_whose_drain_a_pdb_holds_counts_as_blocked_while_it_runs(client: Client) -> None:
    fleet = PdbHeldFleet(size=3)
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt="reboot"),
        policy=examples.policy(max_unavailable=1),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await fleet.draining.wait()
        await handle.signal(RolloutWorkflow.nodes_changed)  # what the controller sends; a turn observes
        for _ in range(300):
            state = await progress(handle)
            if state.blocked:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the held drain never counted as blocked")
        (canary,) = state.running_nodes
        assert state.blocked_nodes == (canary,)
        assert state.blocked == 1
        assert "DrainBlocked" in state.blocked_reasons[canary]
        assert "trainer-pdb" in state.blocked_reasons[canary]
        assert "default/trainer-0" in state.blocked_reasons[canary]
        fleet.release.set()
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 3,
            30.0,
            "all nodes",
            interval=0.05,
            blocking=False,
        )
        await handle.terminate("test done")


async def test_abort_lets_in_flight_nodes_finish_their_stage_and_uncordons_them(client: Client) -> None:
    fleet = FakeFleet(size=5, hold_stages=True)
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}]
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt="reboot"),
        policy=examples.policy(max_unavailable=2, steps=steps),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: len(fleet.started_nodes()) == 2, 30.0, "the first batch", interval=0.05, blocking=False
        )
        in_flight = set(fleet.started_nodes())
        assert fleet.cordoned() == in_flight
        await handle.signal(RolloutWorkflow.abort)
        # While its nodes finish, the aborting rollout starts nothing yet is not shown as paused.
        await handle.signal(RolloutWorkflow.nodes_changed)  # a turn after the abort
        for _ in range(300):
            aborting = await progress(handle)
            if aborting.message.startswith("aborting"):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the rollout never reported aborting")
        assert aborting.phase == "Progressing"
        assert not aborting.paused
        fleet.release.set()
        result = await handle.result()
    assert result.phase == ABORTED
    assert fleet.cordoned() == set()
    assert set(fleet.uncordoned) == in_flight
    # Each in-flight node finished the stage it was in ("apply") and started no other.
    assert sorted(fleet.started_stages) == sorted((node, "apply") for node in in_flight)
    assert fleet.started_nodes() == sorted(in_flight)


ONE_AT_A_TIME = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]


def one_at_a_time() -> RolloutInput:
    """A profile of its own without an interrupt, rolled out one node at a time."""
    return RolloutInput(
        profile=examples.profile(name=unique(), interrupt=None),
        policy=examples.policy(max_unavailable=1, steps=ONE_AT_A_TIME),
        settings=SETTINGS,
    )


def next_generation(rollout: RolloutInput) -> SpecChange:
    """The rollout's profile edited to a new version (its next generation), the policy unchanged."""
    name = rollout.profile.metadata.name
    new = examples.profile(name=name, interrupt=None, version="1.1.0", generation=2)
    return SpecChange(profile=new, policy=rollout.policy)


@pytest.mark.parametrize("edit", ["policy", "spec"])
async def test_an_aborting_rollout_stays_aborted_through_a_policy_edit_but_not_a_new_spec(
    client: Client, edit: str
) -> None:
    # What a user expects (docs/cli.md): abort holds until the profile's spec changes or a human
    # resumes. A DeploymentPolicy edit (it may pace many profiles) is no decision to roll out again.
    fleet = FakeFleet(size=3, hold_stages=True)
    rollout = one_at_a_time()
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: len(fleet.started_nodes()) == 1, 30.0, "the first node", interval=0.05, blocking=False
        )
        await handle.signal(RolloutWorkflow.abort)
        if edit == "policy":
            change = SpecChange(
                profile=rollout.profile, policy=examples.policy(max_unavailable=3, steps=ONE_AT_A_TIME)
            )
        else:
            change = next_generation(rollout)
        await handle.signal(RolloutWorkflow.spec_changed, change)
        fleet.release.set()
        if edit == "policy":
            result = await handle.result()
            assert result.phase == ABORTED
            assert len(fleet.started_nodes()) == 1
        else:
            done = await in_phase(handle, "Complete")
            assert done.generation == 2
            assert fleet.started_nodes() == sorted(fleet.nodes)
            await handle.terminate("test done")


@dataclass
class AbortTurnHeldFleet(FakeFleet):
    """The first observe-and-decide that folds in a node's report under an abort waits for
    ``observe`` first, so a test can signal while that turn is in flight."""

    deciding: asyncio.Event = field(default_factory=asyncio.Event)
    observe: asyncio.Event = field(default_factory=asyncio.Event)

    @activity.defn(name=NAMES.OBSERVE_AND_DECIDE)
    async def observe_and_decide(self, request: DecideRequest) -> DecideReport:
        if request.controls.aborted and request.results and not self.deciding.is_set():
            self.deciding.set()
            await self.observe.wait()
        return await super().observe_and_decide(request)


async def test_a_new_spec_signalled_while_the_last_aborted_node_is_folded_in_continues_the_rollout(
    client: Client,
) -> None:
    # The turn after the abort folds in the last running node's report while a new generation
    # arrives during that turn: the rollout goes on towards the new spec (docs/cli.md) instead of
    # ending Aborted with the spec change unread.
    fleet = AbortTurnHeldFleet(size=3, hold_stages=True)
    rollout = one_at_a_time()
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: len(fleet.started_nodes()) == 1, 30.0, "the first node", interval=0.05, blocking=False
        )
        await handle.signal(RolloutWorkflow.abort)
        fleet.release.set()  # after the abort: the node's report reaches an aborted turn
        await fleet.deciding.wait()
        await handle.signal(RolloutWorkflow.spec_changed, next_generation(rollout))
        fleet.observe.set()
        done = await in_phase(handle, "Complete")
        assert done.generation == 2
        assert fleet.started_nodes() == sorted(fleet.nodes)
        await handle.terminate("test done")


async def test_a_node_updated_under_a_foreign_cordon_is_cordoned_again_when_it_is_lifted(
    client: Client,
) -> None:
    # Someone else cordoned the node; the rollout works under that cordon and must never lift it.
    # When they lift it mid-update, the node this rollout is disrupting must stay cordoned: the
    # workflow cordons it as its own (and drains it again) before the next stage, and lifts that
    # cordon itself once done.
    fleet = FakeFleet(size=1, hold_stages=True)
    [node] = fleet.nodes
    fleet.nodes[node]["spec"]["unschedulable"] = True
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt="reboot"),
        policy=examples.policy(max_unavailable=1),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: bool(fleet.started_stages), 30.0, "the first stage", interval=0.05, blocking=False
        )
        assert fleet.cordoned_at_stages[0][2]
        assert cordon_key(rollout.profile.metadata.name) not in fleet.annotations(node)  # not ours
        fleet.nodes[node]["spec"].pop("unschedulable")  # the other party uncordons
        fleet.release.set()
        await in_phase(handle, "Complete")
        await handle.terminate("test done")
    later = fleet.cordoned_at_stages[1:]
    assert later
    assert all(cordoned for _, _, cordoned in later), fleet.cordoned_at_stages
    assert fleet.drained == [node, node]  # drained again once cordoned again
    assert fleet.uncordoned == [node]  # our own cordon, lifted at the end
    assert fleet.cordoned() == set()


async def test_a_failed_canary_halts_before_any_other_node_is_touched(client: Client) -> None:
    fleet = FakeFleet(size=5)
    rollout = RolloutInput(
        profile=examples.profile(name=unique()), policy=examples.policy(), settings=SETTINGS
    )
    canary = "gpu-node-0000"
    fleet.failing_nodes = {f"gpu-node-000{i}" for i in range(5)}
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: "Failed" in fleet.statuses.values(),
            30.0,
            "the canary to fail",
            interval=0.05,
            blocking=False,
        )
        halted = await in_phase(handle, "Halted")
        assert halted.failed == 1
        assert len(fleet.started_nodes()) == 1
        failed = fleet.started_nodes()[0]
        assert fleet.recorded_by == [(failed, NAMES.RECORD_STATE)], "a failure is recorded on its own"
        healthy = canary if failed != canary else "gpu-node-0004"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(RolloutWorkflow.retry_node, healthy)
        assert f"{healthy} has not failed in this rollout (failed: {failed})" in str(refused.value.cause)
        await handle.terminate("test done")


async def test_the_node_records_every_passed_stage_and_completes_the_package(client: Client) -> None:
    fleet = FakeFleet(size=1)
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]
    name = unique()
    rollout = RolloutInput(
        profile=examples.profile(name=name, interrupt="reboot"),
        policy=examples.policy(max_unavailable=1, steps=steps),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: fleet.statuses.get("gpu-node-0000") == "Complete",
            30.0,
            "the node",
            interval=0.05,
            blocking=False,
        )
        await asyncio.sleep(0.5)  # let the node report and close before its worker goes
        await handle.terminate("test done")
    record = read_profile_state(fleet.annotations("gpu-node-0000"), name).packages["tuning"]
    assert record.version == "1.0.0"
    assert record.pending is None
    assert [stage for _, stage in fleet.started_stages] == ["apply", "config", "interrupt", "post-interrupt"]
    # The stages' activity records each one as it passes (the interrupt once the node is back from
    # its reboot, which the same activity waits for): no extra activity.
    assert [by for _, by in fleet.recorded_by] == [NAMES.RUN_STAGES] * 4
    assert fleet.rebooted == ["gpu-node-0000"]


async def node_activities(client: Client, profile: str, node: str) -> list[str]:
    """The activity types a node workflow scheduled, in order."""
    history = await client.get_workflow_handle(node_workflow_id(profile, node)).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


@pytest.mark.parametrize(
    ("interrupt", "expected"),
    [
        # The status rides on the cordon and the uncordon; the boot id read and the reboot wait in
        # the stages' activity.
        ("reboot", [NAMES.CORDON, NAMES.DRAIN, NAMES.RUN_STAGES, NAMES.UNCORDON]),
        # No cordon: the stages' activity carries the statuses.
        (None, [NAMES.RUN_STAGES]),
    ],
)
async def test_a_node_runs_one_activity_for_its_stages_plus_its_cordon_and_drain(
    client: Client, interrupt: str | None, expected: list[str]
) -> None:
    """Each activity costs the node a workflow task queued behind every other node's."""
    fleet = FakeFleet(size=1)
    name = unique()
    rollout = RolloutInput(
        profile=examples.profile(name=name, interrupt=interrupt),
        policy=examples.policy(max_unavailable=1),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        node = client.get_workflow_handle(node_workflow_id(name, "gpu-node-0000"))
        await until(lambda: fleet.started_stages != [], 30.0, "the node", interval=0.05, blocking=False)
        await node.result()
        await handle.terminate("test done")
    assert await node_activities(client, name, "gpu-node-0000") == expected
    assert fleet.statuses["gpu-node-0000"] == "Complete"
    assert not fleet.cordoned()
    assert fleet.rebooted == (["gpu-node-0000"] if interrupt else [])


async def test_retrying_a_failed_canary_reruns_it_and_the_rollout_goes_on(client: Client) -> None:
    fleet = FakeFleet(size=3)
    fleet.failing_nodes = {f"gpu-node-000{i}" for i in range(3)}
    rollout = RolloutInput(
        profile=examples.profile(name=unique()), policy=examples.policy(), settings=SETTINGS
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await halted(handle)
        (canary,) = fleet.started_nodes()
        fleet.failing_nodes = set()  # the operator fixed the host
        await handle.execute_update(RolloutWorkflow.retry_node, canary)
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 3,
            30.0,
            "every node",
            interval=0.05,
            blocking=False,
        )
        await handle.terminate("test done")
    canary_stages = [stage for node, stage in fleet.started_stages if node == canary]
    # The failed first stage ran again; nothing before it had passed.
    assert canary_stages == ["apply", "apply", "config", "interrupt", "post-interrupt"]


async def test_retrying_a_failed_node_whose_record_is_corrupt_blocks_only_that_node(client: Client) -> None:
    """The retry cannot forget a failure it cannot read: the rollout goes on without the node, which
    is listed as UnreadableState until a human resets its record; then it completes too."""
    fleet = FakeFleet(size=3)
    fleet.failing_nodes = {f"gpu-node-000{i}" for i in range(3)}
    name = unique()
    rollout = RolloutInput(profile=examples.profile(name=name), policy=examples.policy(), settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await halted(handle)
        (canary,) = fleet.started_nodes()
        fleet.failing_nodes = set()
        fleet.annotations(canary)[state_key(name)] = '{"v":1,"profile":'
        await handle.execute_update(RolloutWorkflow.retry_node, canary)
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 2,
            30.0,
            "the other nodes",
            interval=0.05,
            blocking=False,
        )
        blocked = await until_progress(handle, lambda p: canary in p.blocked_reasons, "the canary blocked")
        assert blocked.blocked_reasons[canary].startswith("UnreadableState")
        del fleet.annotations(canary)[state_key(name)]  # what `fleetwright node reset` does
        await handle.signal(RolloutWorkflow.nodes_changed)
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 3,
            30.0,
            "every node",
            interval=0.05,
            blocking=False,
        )
        await handle.terminate("test done")


async def test_skipping_a_failed_canary_leaves_it_alone_and_the_rollout_goes_on(client: Client) -> None:
    fleet = FakeFleet(size=3)
    fleet.failing_nodes = {f"gpu-node-000{i}" for i in range(3)}
    rollout = RolloutInput(
        profile=examples.profile(name=unique()), policy=examples.policy(), settings=SETTINGS
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await halted(handle)
        (canary,) = fleet.started_nodes()
        fleet.failing_nodes = set()
        await handle.execute_update(RolloutWorkflow.skip_node, canary)
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 2,
            30.0,
            "the other nodes",
            interval=0.05,
            blocking=False,
        )
        progress_now = await in_phase(handle, "Complete")
        await handle.terminate("test done")
    assert (fleet.statuses[canary], fleet.reasons[canary]) == ("Failed", "StageFailed")
    assert [stage for node, stage in fleet.started_stages if node == canary] == ["apply"]
    assert progress_now.targeted == 2


@dataclass
class ContinuedRollout:
    """A rollout run to completion across continue-as-new: its fleet, first and latest runs."""

    fleet: FakeFleet
    first_run: str
    latest_run: str
    first_history: WorkflowHistory
    latest_history: WorkflowHistory


async def run_across_runs(client: Client, size: int, settings: EngineSettings) -> ContinuedRollout:
    fleet = FakeFleet(size=size)
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt=None),
        policy=examples.policy(max_unavailable=2),
        settings=settings,
    )
    handle, queue = await start(client, fleet, rollout)
    first_run = (await handle.describe()).run_id
    # Follow the workflow id, not the first run: that run closes when it continues as new.
    latest: WorkflowHandle[RolloutWorkflow, Progress] = client.get_workflow_handle_for(
        RolloutWorkflow.run, handle.id
    )
    async with build_worker(client, fleet.activities(), task_queue=queue):
        # A liveness bound, not a speed claim: a dozen nodes two at a time, each batch a real
        # server round of turns, on a machine that may be busy with other work.
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == size,
            180,
            "every node",
            interval=0.05,
            blocking=False,
        )
        # No query here: one sent while a run hands over to the next can wait out the test
        # server's deadline. The fleet and the histories say what these tests need.
        await asyncio.sleep(1.0)
        description = await latest.describe()
        latest_history = await latest.fetch_history()
        first_history = await client.get_workflow_handle(handle.id, run_id=first_run).fetch_history()
        await latest.terminate("test done")
    for node in fleet.nodes:
        record = read_profile_state(fleet.annotations(node), rollout.profile.metadata.name).packages["tuning"]
        assert (record.version, record.pending) == ("1.0.0", None)
    return ContinuedRollout(fleet, first_run, description.run_id, first_history, latest_history)


async def test_continue_as_new_keeps_history_bounded_and_loses_no_node(client: Client) -> None:
    # No look-up of ended node workflows within the test: a report sent while the rollout hands
    # over to its next run must reach that run (it once replaced them with the carried ones).
    settings = SETTINGS.model_copy(
        update={"history_events_before_continue": 100, "ended_check_seconds": 3600}
    )
    done = await run_across_runs(client, 12, settings)
    assert done.latest_run != done.first_run
    # The threshold plus one turn of slack: a run never grows far past it.
    assert len(done.latest_history.events) < 200
    # The new run starts with the progress the last one published (the server carries no upserted
    # memo), so readers never see an empty rollout between runs.
    started = done.latest_history.events[0].workflow_execution_started_event_attributes
    assert "progress" in started.memo.fields


async def test_a_history_past_its_byte_bound_continues_as_new(client: Client) -> None:
    """At thousands of nodes bytes, not events, near the server's limit first: a rollout whose
    history passes ``history_bytes_before_continue`` continues as new long before its event bound."""
    settings = SETTINGS.model_copy(
        update={
            "history_events_before_continue": 100_000,
            "history_bytes_before_continue": 64 * 1024,
            "ended_check_seconds": 3600,
        }
    )
    done = await run_across_runs(client, 16, settings)
    assert done.latest_run != done.first_run
    # Well before the event bound (100,000): about 64 KiB of history (sixteen nodes take ~130 KiB).
    assert len(done.first_history.events) < 400
    last = done.first_history.events[-1]
    assert last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id


@dataclass
class SlowDecideFleet(FakeFleet):
    """Every observe-and-decide takes a real half second, as reading a large fleet does."""

    @activity.defn(name=NAMES.OBSERVE_AND_DECIDE)
    async def observe_and_decide(self, request: DecideRequest) -> DecideReport:
        await asyncio.sleep(0.5)
        return await super().observe_and_decide(request)


async def test_turns_woken_by_node_reports_are_spaced_by_the_last_turns_duration(client: Client) -> None:
    fleet = SlowDecideFleet(size=6)
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt=None),
        policy=examples.policy(max_unavailable=2),
        settings=SETTINGS,
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 6,
            30.0,
            "every node",
            interval=0.05,
            blocking=False,
        )
        history = await handle.fetch_history()
        await handle.terminate("test done")
    asked_at: dict[int, datetime] = {}
    turns: list[tuple[datetime, datetime]] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name == NAMES.OBSERVE_AND_DECIDE:
                asked_at[event.event_id] = event.event_time.ToDatetime()
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled in asked_at:
                turns.append((asked_at[scheduled], event.event_time.ToDatetime()))
    assert len(turns) >= 4
    for (asked, answered), (next_asked, _) in itertools.pairwise(turns):
        assert next_asked - answered >= answered - asked, "a turn followed the last one too soon"


async def test_a_node_that_joins_after_completion_gets_its_packages(client: Client) -> None:
    fleet = FakeFleet(size=3)
    rollout = RolloutInput(
        profile=examples.profile(name=unique(), interrupt=None), policy=examples.policy(), settings=SETTINGS
    )
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 3,
            30.0,
            "the first three",
            interval=0.05,
            blocking=False,
        )
        await asyncio.sleep(0.5)
        joined = FakeFleet(size=4).nodes["gpu-node-0003"]
        fleet.nodes["gpu-node-0003"] = joined
        await handle.signal(RolloutWorkflow.nodes_changed)
        await until(
            lambda: fleet.statuses.get("gpu-node-0003") == "Complete",
            30.0,
            "the joined node",
            interval=0.05,
            blocking=False,
        )
        state = await progress(handle)
        for _ in range(50):
            if state.phase == "Complete":
                break
            await asyncio.sleep(0.1)
            state = await progress(handle)
        await handle.terminate("test done")
    assert state.phase == "Complete"
    assert (state.updated, state.targeted) == (4, 4)
    assert fleet.started_nodes() == ["gpu-node-0000", "gpu-node-0001", "gpu-node-0002", "gpu-node-0003"]
