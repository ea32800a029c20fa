"""The rollout and node workflows on the time-skipping server, over an in-memory fleet.

``SETTINGS``, ``start``, ``unique``, ``progress``, ``in_phase`` and ``halted`` live in
``tests.support.rollouts``; the other workflow-tier files still import them from here."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from fleetwright.activities.payloads import NAMES, DecideReport, DecideRequest, DrainReport, DrainRequest
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.keys import condition_type, cordon_key, state_key
from fleetwright.kube import nodestatus
from fleetwright.local import examples
from fleetwright.planner.node.state import read_profile_state
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import RolloutInput, SpecChange
from fleetwright.workflows.rollout import ABORTED, RolloutWorkflow
from tests.support.rollouts import (
    SETTINGS,
    Handle,
    halted,
    in_phase,
    node_activities,
    progress,
    rollout_input,
    running,
    unique,
)
from tests.support.waiting import until_complete, until_fleet, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow


def failing_fleet(size: int, **options: Any) -> FakeFleet:
    """A fleet whose every node fails its first stage until ``failing_nodes`` is emptied."""
    fleet = FakeFleet(size=size, **options)
    fleet.failing_nodes = set(fleet.nodes)
    return fleet


async def fixed_canary(handle: Handle, fleet: FakeFleet) -> str:
    """The canary, once the rollout halted on its failure; then its host is fixed (nothing fails)."""
    await halted(handle)
    (canary,) = fleet.started_nodes()
    fleet.failing_nodes = set()  # the operator fixed the host
    return canary


def batches_of(size: int, max_unavailable: int | None = None) -> DeploymentPolicy:
    """No canary: fixed batches of ``size`` under a cap of ``max_unavailable`` (``size`` unless given)."""
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": size}}]
    return examples.policy(max_unavailable=max_unavailable or size, steps=steps)


async def test_a_rollout_completes_with_canary_first_and_the_cap_held(client: Client) -> None:
    fleet = FakeFleet(size=7)
    async with running(client, fleet, rollout_input(examples.policy(max_unavailable=2))) as handle:
        await until_fleet(
            lambda: len(fleet.statuses) == 7 and set(fleet.statuses.values()) == {"Complete"}, "all nodes"
        )
        state = await in_phase(handle, "Complete")
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
    rollout = rollout_input(examples.policy(max_unavailable=3, steps=steps))
    async with running(client, fleet, rollout) as handle:
        await until_fleet(lambda: "Complete" in fleet.statuses.values(), "the canary")
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
        await until_complete(fleet.statuses, 4, "the rest")


async def test_pause_mid_batch_starts_no_new_node_until_resume(client: Client) -> None:
    fleet = FakeFleet(size=6, hold_stages=True)
    async with running(client, fleet, rollout_input(batches_of(2), interrupt=None)) as handle:
        await until_fleet(lambda: len(fleet.started_nodes()) == 2, "the first batch")
        await handle.signal(RolloutWorkflow.pause)
        await in_phase(handle, "Paused")
        fleet.release.set()
        await until_complete(fleet.statuses, 2, "the batch to finish")
        # The turn that folds in both reports decides under the pause: nothing new starts.
        paused = await until_progress(handle, lambda state: state.updated == 2, "the batch's reports")
        assert paused.phase == "Paused"
        assert len(fleet.started_nodes()) == 2
        await handle.signal(RolloutWorkflow.resume)
        await until_complete(fleet.statuses, 6, "the rest after resume")


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


async def node_starts_commanded(handle: Handle) -> int:
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
    async with running(client, fleet, rollout_input(batches_of(2), interrupt=None)) as handle:
        await fleet.deciding.wait()
        await handle.signal(control)  # recorded in history before the activity completes
        fleet.decided.set()
        # The turn ends by publishing its progress, after any start it made.
        wanted = ABORTED if control == "abort" else "Paused"
        await until_progress(handle, lambda state: state.phase == wanted, wanted, within=30.0)
        # The held decision would have started two nodes; the one taken under the control none.
        assert not fleet.requests[0].controls.paused
        assert not fleet.requests[0].controls.aborted
        assert await node_starts_commanded(handle) == 0
        assert fleet.started_nodes() == []
        if control == "pause":
            await handle.signal(RolloutWorkflow.resume)
            await until_complete(fleet.statuses, 4, "all after resume")


@dataclass
class PdbHeldFleet(FakeFleet):
    """The drain of every node is held by a PodDisruptionBudget until ``release`` is set: it shows
    that on the node's condition for the profile, as the real drain activity does."""

    draining: asyncio.Event = field(default_factory=asyncio.Event)

    @activity.defn(name=NAMES.DRAIN)
    async def drain(self, request: DrainRequest) -> DrainReport:
        kind = condition_type(request.profile)
        message = f"drain of {request.node}: default/trainer-0: PodDisruptionBudget trainer-pdb"
        # Keyed by type, as the apiserver keeps a Node's conditions: it replaces the node's
        # condition for the profile, and the drain's end replaces it again.
        self._put_condition(
            request.node, kind, nodestatus.NodeStatusCondition(kind, "False", "DrainBlocked", message)
        )
        self.draining.set()
        await self.release.wait()
        self._put_condition(
            request.node,
            kind,
            nodestatus.NodeStatusCondition(kind, "True", "Drained", f"drain of {request.node} finished"),
        )
        return DrainReport()


async def test_a_node_whose_drain_a_pdb_holds_counts_as_blocked_while_it_runs(client: Client) -> None:
    fleet = PdbHeldFleet(size=3)
    async with running(client, fleet, rollout_input(examples.policy(max_unavailable=1))) as handle:
        await fleet.draining.wait()
        await handle.signal(RolloutWorkflow.nodes_changed)  # what the controller sends; a turn observes
        state = await until_progress(handle, lambda p: bool(p.blocked), "the held drain as blocked", 30.0)
        (canary,) = state.running_nodes
        assert state.blocked_nodes == (canary,)
        assert state.blocked == 1
        assert "DrainBlocked" in state.blocked_reasons[canary]
        assert "trainer-pdb" in state.blocked_reasons[canary]
        assert "default/trainer-0" in state.blocked_reasons[canary]
        fleet.release.set()
        await until_complete(fleet.statuses, 3, "all nodes")


async def test_abort_lets_in_flight_nodes_finish_their_stage_and_uncordons_them(client: Client) -> None:
    fleet = FakeFleet(size=5, hold_stages=True)
    async with running(client, fleet, rollout_input(batches_of(2))) as handle:
        await until_fleet(lambda: len(fleet.started_nodes()) == 2, "the first batch")
        in_flight = set(fleet.started_nodes())
        assert fleet.cordoned() == in_flight
        await handle.signal(RolloutWorkflow.abort)
        # While its nodes finish, the aborting rollout starts nothing yet is not shown as paused.
        await handle.signal(RolloutWorkflow.nodes_changed)  # a turn after the abort
        aborting = await until_progress(handle, lambda p: p.message.startswith("aborting"), "aborting", 30.0)
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


def one_at_a_time() -> RolloutInput:
    """A profile of its own without an interrupt, rolled out one node at a time."""
    return rollout_input(batches_of(1), interrupt=None)


def next_generation(rollout: RolloutInput) -> SpecChange:
    """The rollout's profile edited to a new version (its next generation), the policy unchanged."""
    name = rollout.profile.metadata.name
    new = examples.profile(name=name, interrupt=None, version="1.1.0", generation=2)
    return SpecChange(profile=new, policy=rollout.policy)


async def abort_after_the_first_node(handle: Handle, fleet: FakeFleet) -> None:
    """Abort a one-at-a-time rollout once its first node started."""
    await until_fleet(lambda: len(fleet.started_nodes()) == 1, "the first node")
    await handle.signal(RolloutWorkflow.abort)


@pytest.mark.parametrize("edit", ["policy", "spec"])
async def test_an_aborting_rollout_stays_aborted_through_a_policy_edit_but_not_a_new_spec(
    client: Client, edit: str
) -> None:
    # What a user expects (docs/cli.md): abort holds until the profile's spec changes or a human
    # resumes. A DeploymentPolicy edit (it may pace many profiles) is no decision to roll out again.
    fleet = FakeFleet(size=3, hold_stages=True)
    rollout = one_at_a_time()
    async with running(client, fleet, rollout) as handle:
        await abort_after_the_first_node(handle, fleet)
        if edit == "policy":
            change = SpecChange(profile=rollout.profile, policy=batches_of(1, max_unavailable=3))
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
    async with running(client, fleet, rollout) as handle:
        await abort_after_the_first_node(handle, fleet)
        fleet.release.set()  # after the abort: the node's report reaches an aborted turn
        await fleet.deciding.wait()
        await handle.signal(RolloutWorkflow.spec_changed, next_generation(rollout))
        fleet.observe.set()
        done = await in_phase(handle, "Complete")
        assert done.generation == 2
        assert fleet.started_nodes() == sorted(fleet.nodes)


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
    rollout = rollout_input(examples.policy(max_unavailable=1))
    async with running(client, fleet, rollout) as handle:
        await until_fleet(lambda: bool(fleet.started_stages), "the first stage")
        assert fleet.cordoned_at_stages[0][2]
        assert cordon_key(rollout.profile.metadata.name) not in fleet.annotations(node)  # not ours
        fleet.nodes[node]["spec"].pop("unschedulable")  # the other party uncordons
        fleet.release.set()
        await in_phase(handle, "Complete")
    later = fleet.cordoned_at_stages[1:]
    assert later
    assert all(cordoned for _, _, cordoned in later), fleet.cordoned_at_stages
    assert fleet.drained == [node, node]  # drained again once cordoned again
    assert fleet.uncordoned == [node]  # our own cordon, lifted at the end
    assert fleet.cordoned() == set()


async def test_a_failed_canary_halts_before_any_other_node_is_touched(client: Client) -> None:
    fleet = failing_fleet(5)
    canary = "gpu-node-0000"
    async with running(client, fleet, rollout_input()) as handle:
        await until_fleet(lambda: "Failed" in fleet.statuses.values(), "the canary to fail")
        stopped = await halted(handle)
        assert stopped.failed == 1
        assert len(fleet.started_nodes()) == 1
        failed = fleet.started_nodes()[0]
        assert fleet.recorded_by == [(failed, NAMES.RECORD_STATE)], "a failure is recorded on its own"
        healthy = canary if failed != canary else "gpu-node-0004"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(RolloutWorkflow.retry_node, healthy)
        assert f"{healthy} has not failed in this rollout (failed: {failed})" in str(refused.value.cause)


async def test_the_node_records_every_passed_stage_and_completes_the_package(client: Client) -> None:
    fleet = FakeFleet(size=1)
    name = unique()
    async with running(client, fleet, rollout_input(batches_of(1), name=name)):
        await until_fleet(lambda: fleet.statuses.get("gpu-node-0000") == "Complete", "the node")
        # The node reports and closes before its worker goes.
        await client.get_workflow_handle(node_workflow_id(name, "gpu-node-0000")).result()
    record = read_profile_state(fleet.annotations("gpu-node-0000"), name).packages["tuning"]
    assert record.version == "1.0.0"
    assert record.pending is None
    assert [stage for _, stage in fleet.started_stages] == ["apply", "config", "interrupt", "post-interrupt"]
    # The stages' activity records each one as it passes (the interrupt once the node is back from
    # its reboot, which the same activity waits for): no extra activity.
    assert [by for _, by in fleet.recorded_by] == [NAMES.RUN_STAGES] * 4
    assert fleet.rebooted == ["gpu-node-0000"]


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
    rollout = rollout_input(examples.policy(max_unavailable=1), name=name, interrupt=interrupt)
    async with running(client, fleet, rollout):
        node = client.get_workflow_handle(node_workflow_id(name, "gpu-node-0000"))
        await until_fleet(lambda: fleet.started_stages != [], "the node")
        await node.result()
    assert await node_activities(client, name, "gpu-node-0000") == expected
    assert fleet.statuses["gpu-node-0000"] == "Complete"
    assert not fleet.cordoned()
    assert fleet.rebooted == (["gpu-node-0000"] if interrupt else [])


async def test_retrying_a_failed_canary_reruns_it_and_the_rollout_goes_on(client: Client) -> None:
    fleet = failing_fleet(3)
    async with running(client, fleet, rollout_input()) as handle:
        canary = await fixed_canary(handle, fleet)
        await handle.execute_update(RolloutWorkflow.retry_node, canary)
        await until_complete(fleet.statuses, 3, "every node")
    canary_stages = [stage for node, stage in fleet.started_stages if node == canary]
    # The failed first stage ran again; nothing before it had passed.
    assert canary_stages == ["apply", "apply", "config", "interrupt", "post-interrupt"]


async def test_retrying_a_failed_node_whose_record_is_corrupt_blocks_only_that_node(client: Client) -> None:
    """The retry cannot forget a failure it cannot read: the rollout goes on without the node, which
    is listed as UnreadableState until a human resets its record; then it completes too."""
    fleet = failing_fleet(3)
    name = unique()
    async with running(client, fleet, rollout_input(name=name)) as handle:
        canary = await fixed_canary(handle, fleet)
        fleet.annotations(canary)[state_key(name)] = '{"v":1,"profile":'
        await handle.execute_update(RolloutWorkflow.retry_node, canary)
        await until_complete(fleet.statuses, 2, "the other nodes")
        blocked = await until_progress(handle, lambda p: canary in p.blocked_reasons, "the canary blocked")
        assert blocked.blocked_reasons[canary].startswith("UnreadableState")
        del fleet.annotations(canary)[state_key(name)]  # what `fleetwright node reset` does
        await handle.signal(RolloutWorkflow.nodes_changed)
        await until_complete(fleet.statuses, 3, "every node")


async def test_skipping_a_failed_canary_leaves_it_alone_and_the_rollout_goes_on(client: Client) -> None:
    fleet = failing_fleet(3)
    async with running(client, fleet, rollout_input()) as handle:
        canary = await fixed_canary(handle, fleet)
        await handle.execute_update(RolloutWorkflow.skip_node, canary)
        await until_complete(fleet.statuses, 2, "the other nodes")
        progress_now = await in_phase(handle, "Complete")
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
    name = unique()
    rollout = rollout_input(examples.policy(max_unavailable=2), name=name, interrupt=None, settings=settings)
    # The handle follows the workflow id, not the first run: that run closes when it continues as new.
    async with running(client, fleet, rollout) as handle:
        first_run = handle.result_run_id  # the run this start made
        assert first_run is not None
        # A liveness bound, not a speed claim: a dozen nodes two at a time, each batch a real
        # server round of turns, on a machine that may be busy with other work.
        await until_complete(fleet.statuses, size, "every node", within=180)
        # No query here: one sent while a run hands over to the next can wait out the test
        # server's deadline. The fleet and the histories say what these tests need, once every
        # node workflow reported and closed.
        for node in fleet.nodes:
            await client.get_workflow_handle(node_workflow_id(name, node)).result()
        description = await handle.describe()
        latest_history = await handle.fetch_history()
        first_history = await client.get_workflow_handle(handle.id, run_id=first_run).fetch_history()
    for node in fleet.nodes:
        record = read_profile_state(fleet.annotations(node), name).packages["tuning"]
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
        await asyncio.sleep(0.5)  # the fleet's latency, not a wait of the test's
        return await super().observe_and_decide(request)


async def test_turns_woken_by_node_reports_are_spaced_by_the_last_turns_duration(client: Client) -> None:
    fleet = SlowDecideFleet(size=6)
    rollout = rollout_input(examples.policy(max_unavailable=2), interrupt=None)
    async with running(client, fleet, rollout) as handle:
        await until_complete(fleet.statuses, 6, "every node")
        history = await handle.fetch_history()
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


@dataclass
class LostWorkerDecideFleet(FakeFleet):
    """Every observe-and-decide takes two real seconds, as one whose first attempt a lost worker
    held until its timeout does (seen from the workflow, both are one long activity)."""

    @activity.defn(name=NAMES.OBSERVE_AND_DECIDE)
    async def observe_and_decide(self, request: DecideRequest) -> DecideReport:
        await asyncio.sleep(2.0)  # the lost attempt's timeout, not a wait of the test's
        return await super().observe_and_decide(request)


async def test_turns_are_spaced_by_at_most_the_observe_interval(client: Client) -> None:
    """A turn that outlived a lost worker was not slow to observe: the next one waits at most
    ``observe_interval_seconds`` after it, never the whole turn's length again."""
    settings = SETTINGS.model_copy(update={"observe_interval_seconds": 1, "ended_check_seconds": 3600})
    rollout = rollout_input(examples.policy(max_unavailable=2), interrupt=None, settings=settings)
    fleet = LostWorkerDecideFleet(size=4)
    async with running(client, fleet, rollout) as handle:
        await until_complete(fleet.statuses, 4, "every node")
        history = await handle.fetch_history()
    timers = [
        event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    # The look for ended node workflows waits about an hour; every shorter timer paces a turn.
    paced = [timer for timer in timers if timer < timedelta(minutes=30)]
    assert paced, timers
    assert max(paced) <= timedelta(seconds=1), paced
    patches = [
        json.loads(event.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert patches == ["pace-bounded"], patches


async def test_a_node_that_joins_after_completion_gets_its_packages(client: Client) -> None:
    fleet = FakeFleet(size=3)
    async with running(client, fleet, rollout_input(interrupt=None)) as handle:
        await until_complete(fleet.statuses, 3, "the first three")
        await in_phase(handle, "Complete")
        joined = FakeFleet(size=4).nodes["gpu-node-0003"]
        fleet.nodes["gpu-node-0003"] = joined
        await handle.signal(RolloutWorkflow.nodes_changed)
        await until_fleet(lambda: fleet.statuses.get("gpu-node-0003") == "Complete", "the joined node")
        state = await until_progress(
            handle, lambda p: p.phase == "Complete" and p.updated == 4, "four updated"
        )
    assert state.phase == "Complete"
    assert (state.updated, state.targeted) == (4, 4)
    assert fleet.started_nodes() == ["gpu-node-0000", "gpu-node-0001", "gpu-node-0002", "gpu-node-0003"]
