"""Issue 37 on the workflow tier: the failures a rule tolerates, left cordoned, fill the budget, and
the rollout fires its failure action (rollback or halt) instead of staying Blocked for good."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.deploymentpolicy import DeploymentPolicy, FailurePolicy
from fleetwright.local import examples
from fleetwright.planner.node.packages import config_digests
from fleetwright.planner.node.state import PackageRecord, read_profile_state
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.payloads import Progress, RolloutInput
from tests.support.rollouts import SETTINGS, in_phase, start, unique
from tests.workflow.fakefleet import FakeFleet
from tests.workflow.test_rollout_rollback import fleet_at_1_0_0

pytestmark = pytest.mark.workflow

LEFT = "left cordoned by this profile (its change failed)"


def tolerant(action: str) -> DeploymentPolicy:
    """The issue's policy: batches of two under maxUnavailable 2, two failed nodes tolerated."""
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}]
    deployment = examples.policy(max_unavailable=2, steps=steps)
    failure = FailurePolicy.model_validate({"maxFailedNodes": 2, "action": action})
    return deployment.model_copy(update={"spec": deployment.spec.model_copy(update={"failure": failure})})


def post_interrupt_of_1_1_0(request: StageRequest) -> bool:
    return request.package.version == "1.1.0" and request.stage.value == "post-interrupt"


async def run(client: Client, action: str, phase: str) -> tuple[Progress, FakeFleet, str, dict[str, str]]:
    name = unique()
    old = examples.profile(name=name, version="1.0.0", interrupt="reboot", generation=1)
    new = examples.profile(name=name, version="1.1.0", interrupt="reboot", generation=2)
    config = config_digests(old.spec.packages[0].config_map)
    fleet = fleet_at_1_0_0(name, 8, config)
    fleet.fails = post_interrupt_of_1_1_0
    rollout = RolloutInput(profile=new, policy=tolerant(action), previous=old, settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        done = await in_phase(handle, phase)
        await handle.terminate("test done")
    return done, fleet, name, config


def changed(fleet: FakeFleet) -> set[str]:
    return {r.node for r in fleet.stage_requests if r.package.version == "1.1.0"}


async def test_failures_filling_the_budget_roll_back_instead_of_blocking(client: Client) -> None:
    done, fleet, name, config = await run(client, "rollback", "RolledBack")
    assert "no node can start: maxUnavailable 2 reached: " in done.message, done.message
    assert "only this rollout's failed nodes hold it (maxFailedNodes 2 tolerates them)" in done.message
    first = changed(fleet)
    assert len(first) == 2, first  # the first batch; nothing else started
    assert {r.node for r in fleet.stage_requests if r.package.version == "1.0.0"} == first
    assert not fleet.cordoned()
    for node in fleet.nodes:
        record = read_profile_state(fleet.annotations(node), name).packages["tuning"]
        assert record == PackageRecord(version="1.0.0", config=config), node


async def test_failures_filling_the_budget_halt_instead_of_blocking(client: Client) -> None:
    done, fleet, _, _ = await run(client, "halt", "Halted")
    first = changed(fleet)
    assert len(first) == 2, first
    assert done.message.startswith("no node can start: maxUnavailable 2 reached: "), done.message
    for node in first:
        assert f"{node} ({LEFT})" in done.message
    assert done.failed == 2
    assert fleet.cordoned() == first  # a halt leaves the failed nodes to a human
