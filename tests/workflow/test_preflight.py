"""The preflight on the workflow tier (``preflight: true``): a node whose checks pass in service is
recorded at the target and never cordoned, drained or interrupted; one whose checks fail takes the
normal path (cordon, drain, stages, uncordon), saying why; without the policy field no preflight
runs. The stage Jobs are faked behind the run-stages activity; the real ones are the integration
tier's."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import NAMES, StageRequest
from fleetwright.api.keys import NodeReason, state_key
from fleetwright.local import examples
from fleetwright.planner.node.stages import Stage
from fleetwright.workflows.payloads import Progress, RolloutInput
from fleetwright.workflows.rollout import ABORTED, RolloutWorkflow
from tests.support.rollouts import in_phase, node_activities, rollout_input, running, unique
from tests.support.waiting import until, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

# gpu-node-0000 and -0002 already carry the target: their checks pass before any work.
CARRYING = {"gpu-node-0000", "gpu-node-0002"}


def rollout(name: str, *, preflight: bool, steps: list[dict[str, Any]] | None = None) -> RolloutInput:
    policy = examples.policy(max_unavailable=2, preflight=preflight, steps=steps)
    return rollout_input(policy, name=name, interrupt="reboot")


async def completed(client: Client, fleet: FakeFleet, name: str, *, preflight: bool) -> Progress:
    """The progress of profile ``name``'s rollout on ``fleet`` once it is Complete."""
    async with running(client, fleet, rollout(name, preflight=preflight)) as handle:
        return await in_phase(handle, "Complete")


def check_fails(request: StageRequest) -> bool:
    """A node that does not carry the target fails its preflight checks (and only those)."""
    return request.preflight and request.node not in CARRYING


async def test_a_node_whose_checks_pass_is_never_cordoned_and_recorded_at_the_target(
    client: Client,
) -> None:
    fleet = FakeFleet(size=4, fails=check_fails)
    name = unique()
    done = await completed(client, fleet, name, preflight=True)
    assert (done.updated, done.spared) == (4, 2)
    cordoned_ever = set().union(*fleet.cordoned_sets)
    assert cordoned_ever == set(fleet.nodes) - CARRYING
    assert set(fleet.drained) == set(fleet.nodes) - CARRYING
    assert set(fleet.rebooted) == set(fleet.nodes) - CARRYING
    # A spared node ran only its checks (apply, config and post-interrupt), in one activity.
    for node in CARRYING:
        ran = [(r.stage, r.preflight) for r in fleet.stage_requests if r.node == node]
        assert ran == [(Stage.APPLY, True), (Stage.CONFIG, True), (Stage.POST_INTERRUPT, True)]
        assert await node_activities(client, name, node) == [NAMES.RUN_STAGES]
        assert fleet.reasons[node] == NodeReason.PREFLIGHT_PASSED
        assert fleet.statuses[node] == "Complete"
    # Recorded exactly as a node that ran its stages.
    records = {n: fleet.annotations(n)[state_key(name)] for n in fleet.nodes}
    assert len(set(records.values())) == 1, records
    # A node whose checks failed took the normal path, saying why.
    failed_first = [s for s in fleet.shown if s[1] == "gpu-node-0001"]
    assert failed_first[0][2] == NodeReason.PREFLIGHT
    assert fleet.reasons["gpu-node-0001"] == NodeReason.COMPLETE
    assert await node_activities(client, name, "gpu-node-0001") == [
        NAMES.RUN_STAGES,
        NAMES.CORDON,
        NAMES.DRAIN,
        NAMES.RUN_STAGES,
        NAMES.UNCORDON,
    ]


async def test_a_node_whose_checks_fail_says_so_when_it_is_cordoned(client: Client) -> None:
    fleet = FakeFleet(size=1, fails=lambda request: request.preflight)
    done = await completed(client, fleet, unique(), preflight=True)
    assert (done.updated, done.spared) == (1, 0)
    reasons = [note.reason for _, note in fleet.notes]
    assert reasons == [NodeReason.PREFLIGHT, NodeReason.UPDATING, NodeReason.COMPLETE], fleet.notes
    updating = fleet.notes[1][1].message
    assert updating.startswith("preflight did not pass (Failed: exit code 1); cordoning"), updating
    assert fleet.cordoned_sets
    assert fleet.rebooted == ["gpu-node-0000"]


async def test_no_preflight_runs_without_the_policy_field(client: Client) -> None:
    fleet = FakeFleet(size=2, fails=check_fails)
    done = await completed(client, fleet, unique(), preflight=False)
    assert (done.updated, done.spared) == (2, 0)
    assert not any(r.preflight for r in fleet.stage_requests)
    assert set().union(*fleet.cordoned_sets) == set(fleet.nodes)
    assert "spared" not in done.model_dump()  # written only when preflight is used


async def test_an_abort_during_the_preflight_ends_the_node_never_cordoned(client: Client) -> None:
    fleet = FakeFleet(size=2, fails=check_fails, holds=lambda request: request.preflight)
    both = [{"name": "both", "batches": {"strategy": "fixed", "initial": 2}}]
    async with running(client, fleet, rollout(unique(), preflight=True, steps=both)) as handle:
        await until(lambda: len(fleet.started_nodes()) == 2, 30.0, "both preflights", blocking=False)
        await handle.signal(RolloutWorkflow.abort)
        await handle.signal(RolloutWorkflow.nodes_changed)  # a turn after the abort
        await until_progress(handle, lambda p: p.message.startswith("aborting"), "aborting")
        fleet.release.set()
        result = await handle.result()
    assert result.phase == ABORTED
    assert fleet.cordoned_sets == []  # neither the failing node nor the passing one was cordoned
    assert fleet.reasons["gpu-node-0001"] == NodeReason.ABORTED
    # Each finished the check it was in and started no other.
    assert sorted(fleet.started_stages) == [("gpu-node-0000", "apply"), ("gpu-node-0001", "apply")]
