"""Deleting a NodeProfile on the time-skipping server: the ``delete`` signal turns the rollout into
the removal of every ``uninstall.enabled`` package under the same policy, then the clean-up
activity runs once and the workflow ends; a failed uninstall halts before any clean-up."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from fleetwright.api.keys import cordon_key, state_key
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.planner.node.state import read_profile_state
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.payloads import Deletion, Progress, RolloutInput
from fleetwright.workflows.rollout import DELETED, RolloutWorkflow
from tests.support.waiting import until_phase
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

SETTINGS = EngineSettings(observe_interval_seconds=60, search_attributes=False)


def removable_profile(*, uninstall: bool = True, runtime_required: bool = False) -> NodeProfile:
    base = examples.profile(name=f"tuning-{uuid.uuid4().hex[:8]}")
    body: dict[str, Any] = base.model_dump(mode="json", by_alias=True, exclude_none=True)
    body["metadata"]["uid"] = str(uuid.uuid4())
    body["spec"]["packages"][0]["uninstall"] = {"enabled": uninstall}
    body["spec"]["runtimeRequired"] = runtime_required
    return NodeProfile.model_validate(body)


async def start(
    client: Client, rollout: RolloutInput
) -> tuple[WorkflowHandle[RolloutWorkflow, Progress], str]:
    queue = f"tq-{uuid.uuid4()}"
    handle = await client.start_workflow(
        RolloutWorkflow.run, rollout, id=f"nodeprofile/{rollout.profile.metadata.name}", task_queue=queue
    )
    return handle, queue


def installed(fleet: FakeFleet, profile: str) -> set[str]:
    return {
        node
        for node in fleet.nodes
        if "tuning" in read_profile_state(fleet.annotations(node), profile).packages
        and read_profile_state(fleet.annotations(node), profile).packages["tuning"].version
    }


async def test_deletion_uninstalls_canary_first_under_the_cap_then_cleans_up_and_ends(client: Client) -> None:
    fleet = FakeFleet(size=5)
    profile = removable_profile()
    name = profile.metadata.name
    rollout = RolloutInput(profile=profile, policy=examples.policy(max_unavailable=2), settings=SETTINGS)
    handle, queue = await start(client, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until_phase(handle, "Complete")
        assert installed(fleet, name) == set(fleet.nodes)
        before = len(fleet.started_stages)
        fleet.max_cordoned = 0
        await handle.signal(RolloutWorkflow.delete, Deletion(profile=profile))
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.phase == DELETED
    assert result.deleting
    uninstalls = fleet.started_stages[before:]
    assert {node for node, stage in uninstalls if stage == "uninstall"} == set(fleet.nodes)
    canary = uninstalls[0][0]
    assert uninstalls[:2] == [(canary, "uninstall"), (canary, "uninstall-interrupt")]
    assert fleet.max_cordoned <= 2
    assert [r.profile for r in fleet.cleaned_up] == [name]
    assert fleet.cleaned_up[0].profile_uid == profile.metadata.uid
    for node in fleet.nodes:
        assert state_key(name) not in fleet.annotations(node)
        assert cordon_key(name) not in fleet.annotations(node)
    assert not fleet.cordoned()


async def test_deletion_without_removable_packages_only_cleans_up(client: Client) -> None:
    fleet = FakeFleet(size=3)
    profile = removable_profile(uninstall=False)
    rollout = RolloutInput(profile=profile, policy=examples.policy(max_unavailable=2), settings=SETTINGS)
    handle, queue = await start(client, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until_phase(handle, "Complete")
        before = len(fleet.started_stages)
        # A deletion whose policy is gone keeps pacing by the rollout's own policy.
        await handle.signal(RolloutWorkflow.delete, Deletion(profile=profile, policy=None))
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.phase == DELETED
    assert fleet.started_stages[before:] == []  # nothing is uninstalled, nothing installed
    assert len(fleet.cleaned_up) == 1
    assert all(state_key(profile.metadata.name) not in fleet.annotations(n) for n in fleet.nodes)


async def test_a_failed_uninstall_halts_the_deletion_and_never_cleans_up(client: Client) -> None:
    fleet = FakeFleet(size=4)
    profile = removable_profile()
    rollout = RolloutInput(profile=profile, policy=examples.policy(max_unavailable=2), settings=SETTINGS)
    handle, queue = await start(client, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until_phase(handle, "Complete")
        fleet.failing_nodes = set(fleet.nodes)
        await handle.signal(RolloutWorkflow.delete, Deletion(profile=profile))
        state = await until_phase(handle, "Halted")
        assert state.deleting
        assert len(state.failed_nodes) == 1  # the canary failed: nothing else was touched
        assert fleet.cleaned_up == []
        described = await handle.describe()
        assert described.status is not None
        assert described.status.name == "RUNNING"
        await handle.terminate("test done")


async def test_a_runtime_required_profile_releases_the_taint_on_each_node_it_completes(
    client: Client,
) -> None:
    fleet = FakeFleet(size=3)
    fleet.failing_nodes = {"gpu-node-0002"}
    profile = removable_profile(runtime_required=True)
    policy = examples.policy(max_unavailable=3, max_failed_nodes=1)
    rollout = RolloutInput(profile=profile, policy=policy, settings=SETTINGS)
    handle, queue = await start(client, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        # Complete means every node workflow reported, so each has lifted its cordon and taint.
        await until_phase(handle, "Complete")
        await handle.terminate("test done")
    # Released after each completed node's last stage; never on the node that failed.
    assert sorted(fleet.untainted) == ["gpu-node-0000", "gpu-node-0001"]
    for node in fleet.untainted:
        stages = [stage for n, stage in fleet.started_stages if n == node]
        assert stages[-1] == "post-interrupt"
