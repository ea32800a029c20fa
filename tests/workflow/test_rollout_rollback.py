"""Automatic rollback end to end on the workflow tier: a failing batch with ``action: rollback``
returns exactly the nodes the rollout changed, under its budget, and then waits for a new spec."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.planner.node.packages import config_digests
from fleetwright.planner.node.state import PackageRecord, format_annotation, read_profile_state
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.payloads import RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import SETTINGS, in_phase, progress, start, unique
from tests.support.waiting import until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

CAP = 3


def policy() -> dict[str, object]:
    return {
        "steps": [
            {"name": "canary", "canary": {"count": 1}},
            {"name": "rest", "batches": {"strategy": "fixed", "initial": 4}},
        ],
        "failure": {"maxFailedNodes": 0, "action": "rollback"},
    }


def rollback_policy(max_unavailable: int) -> DeploymentPolicy:
    """The example policy with ``policy()``'s steps and its rollback failure rule."""
    deployment = examples.policy(max_unavailable=max_unavailable)
    spec = deployment.spec.model_validate({**deployment.spec.model_dump(by_alias=True), **policy()})
    return deployment.model_copy(update={"spec": spec})


def fleet_at_1_0_0(name: str, size: int, config: dict[str, str]) -> FakeFleet:
    """A fake fleet whose every node records ``tuning`` 1.0.0 with ``config`` for profile ``name``."""
    fleet = FakeFleet(size=size)
    record = PackageRecord(version="1.0.0", config=config)
    state = read_profile_state({}, name).model_copy(update={"packages": {"tuning": record}})
    key, value = format_annotation(state)
    for node in fleet.nodes:
        fleet.annotations(node)[key] = value
    return fleet


async def test_a_failing_batch_rolls_back_exactly_the_changed_nodes_under_the_budget(client: Client) -> None:
    name = unique()
    old = examples.profile(name=name, version="1.0.0", interrupt="reboot", generation=1)
    new = examples.profile(name=name, version="1.1.0", interrupt="reboot", generation=2)
    deployment = rollback_policy(CAP)
    config = config_digests(old.spec.packages[0].config_map)
    fleet = fleet_at_1_0_0(name, 20, config)
    # The sixth node to start 1.1.0 (the first of the second batch) fails its first stage; 1.2.0
    # fails everywhere.
    order: list[str] = []

    def fails(request: StageRequest) -> bool:
        if request.package.version != "1.1.0":
            return request.package.version == "1.2.0"
        if request.node not in order:
            order.append(request.node)
        return order.index(request.node) == 5

    fleet.fails = fails
    rollout = RolloutInput(profile=new, policy=deployment, previous=old, settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        rolling = await in_phase(handle, "RollingBack")
        assert rolling.rolled_back_generation == 2
        assert "1 node(s) failed" in rolling.message
        done = await in_phase(handle, "RolledBack")
        # Re-applying the spec that was rolled back does not start it again.
        stages = len(fleet.stage_requests)
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=new, policy=deployment))
        await asyncio.sleep(1)
        again = await progress(handle)
        assert len(fleet.stage_requests) == stages
        # A new spec does; its rollback returns to 1.0.0 again (what the nodes carry after the
        # first rollback), not to the rolled-back 1.1.0.
        newer = examples.profile(name=name, version="1.2.0", interrupt="reboot", generation=3)
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=newer, policy=deployment))
        second = await until_progress(
            handle, lambda p: p.phase == "RolledBack" and p.rolled_back_generation == 3, "a second rollback"
        )
        await handle.terminate("test done")
    assert done.rolled_back_generation == 2
    assert again.phase == "RolledBack"
    assert second.blocked == 0, second.blocked_reasons
    first = fleet.stage_requests[:stages]  # the rollout of 1.1.0 and its rollback
    changed = {r.node for r in first if r.package.version == "1.1.0"}
    returned = {r.node for r in first if r.package.version == "1.0.0"}
    assert len(changed) >= 6  # the canary, the first batch and the failed node at least
    assert returned == changed
    for node in changed:
        back = [r.stage.value for r in first if r.node == node and r.package.version == "1.0.0"]
        assert back == ["apply", "config", "interrupt", "post-interrupt"], node
    later = fleet.stage_requests[stages:]
    (canary,) = {r.node for r in later if r.package.version == "1.2.0"}  # failed: nothing else started
    assert [r.stage.value for r in later if r.package.version == "1.0.0"] == [
        "apply",
        "config",
        "interrupt",
        "post-interrupt",
    ], canary
    assert fleet.max_cordoned <= CAP
    assert not fleet.cordoned()
    for node in fleet.nodes:
        record = read_profile_state(fleet.annotations(node), name).packages["tuning"]
        assert record == PackageRecord(version="1.0.0", config=config), node  # no before left


async def test_a_rollback_that_fails_halts_and_says_so_without_rolling_back_again(client: Client) -> None:
    name = unique()
    old = examples.profile(name=name, version="1.0.0", interrupt=None, generation=1)
    new = examples.profile(name=name, version="1.1.0", interrupt=None, generation=2)
    deployment = rollback_policy(2)
    config = config_digests(old.spec.packages[0].config_map)
    fleet = fleet_at_1_0_0(name, 5, config)
    fleet.fails = lambda request: True  # 1.1.0 fails on the canary, and so does its return
    rollout = RolloutInput(profile=new, policy=deployment, previous=old, settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        halted = await in_phase(handle, "Halted")
        await asyncio.sleep(1)
        after = await progress(handle)
        await handle.terminate("test done")
    assert halted.message.startswith("the rollback failed:"), halted.message
    assert "it was rolling back: canary failed" in halted.message
    assert halted.rolled_back_generation == 2
    assert after.phase == "Halted"
    (canary,) = {r.node for r in fleet.stage_requests}
    assert [(r.package.version, r.stage.value) for r in fleet.stage_requests] == [
        ("1.1.0", "upgrade"),
        ("1.0.0", "apply"),
    ], canary


async def test_a_compartments_own_rule_rolls_back_although_the_policy_halts(client: Client) -> None:
    name = unique()
    old = examples.profile(name=name, version="1.0.0", interrupt=None, generation=1)
    new = examples.profile(name=name, version="1.1.0", interrupt=None, generation=2)
    config = config_digests(old.spec.packages[0].config_map)
    fleet = fleet_at_1_0_0(name, 10, config)  # nodes 0-7 are H100s, 8-9 A100s
    # The policy tolerates five failed nodes and halts; the a100 compartment none, and rolls back.
    steps = [{"name": "all", "batches": {"initial": 2}}]
    deployment = examples.policy(max_unavailable=2, steps=steps, max_failed_nodes=5)
    a100 = {
        "name": "a100",
        "selector": {"matchLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
        "steps": [{"name": "all", "batches": {"initial": 1}}],
        "failure": {"maxFailedNodes": 0, "action": "rollback"},
    }
    spec = deployment.spec.model_validate(
        {**deployment.spec.model_dump(by_alias=True), "compartments": [a100]}
    )
    deployment = deployment.model_copy(update={"spec": spec})
    failing = "gpu-node-0009"
    fleet.fails = lambda request: request.node == failing and request.package.version == "1.1.0"
    rollout = RolloutInput(profile=new, policy=deployment, previous=old, settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        done = await in_phase(handle, "RolledBack")
        await handle.terminate("test done")
    assert f"compartment a100: 1 node(s) failed; first: {failing}" in done.message, done.message
    changed = {r.node for r in fleet.stage_requests if r.package.version == "1.1.0"}
    returned = {r.node for r in fleet.stage_requests if r.package.version == "1.0.0"}
    assert failing in changed
    assert returned == changed
    for node in fleet.nodes:
        record = read_profile_state(fleet.annotations(node), name).packages["tuning"]
        assert record == PackageRecord(version="1.0.0", config=config), node
