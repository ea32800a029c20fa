"""A workload unit waits for its NotReady node on the time-skipping server: its other nodes wait,
named ``WaitingForUnit`` in the progress and in a node condition naming the unit and since when,
while an idle node goes on; the unit starts whole in one batch once the node is Ready again, or
without it once the bound (``refusals.UNIT_WAIT``) has passed, and the condition is gone."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fleetwright.api.keys import unit_wait_condition_type
from fleetwright.local import examples
from fleetwright.planner.rollout.observations import NodeWorkload
from fleetwright.planner.rollout.refusals import UNIT_WAIT
from fleetwright.workflows.payloads import Progress
from tests.support.engine import decisions
from tests.support.rollouts import SETTINGS, Handle, rollout_input, running
from tests.support.waiting import until_fleet, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

JOB = (NodeWorkload(name="Job/ml/train", pods=3, gpus=24),)


def gang_fleet() -> tuple[FakeFleet, list[str]]:
    """Four nodes: a job on the first three (one unit), the last idle; the second NotReady."""
    fleet = FakeFleet(size=4)
    names = sorted(fleet.nodes)
    fleet.workloads = dict.fromkeys(names[:3], JOB)
    set_ready(fleet, names[1], ready=False)
    return fleet, names


def set_ready(fleet: FakeFleet, node: str, *, ready: bool) -> None:
    fleet.nodes[node]["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]


@contextlib.asynccontextmanager
async def gang_rollout(client: Client) -> AsyncIterator[tuple[FakeFleet, list[str], str, Handle]]:
    """The rollout of a profile of its own on ``gang_fleet``, all four nodes in one batch, running
    while the block runs: the fleet, its node names, the profile's name and the rollout's handle."""
    fleet, names = gang_fleet()
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 4}}]
    given = rollout_input(examples.policy(max_unavailable=4, steps=steps))
    async with running(client, fleet, given) as handle:
        yield fleet, names, given.profile.metadata.name, handle


def waiting_for_unit(progress: Progress) -> set[str]:
    return {n for n, r in progress.waiting_reasons.items() if r.startswith("WaitingForUnit: ")}


def unit_wait_conditions(fleet: FakeFleet, profile: str) -> dict[str, dict[str, str]]:
    """node -> its unit-wait condition for ``profile``, for the nodes that carry one."""
    kind = unit_wait_condition_type(profile)
    return {
        name: c
        for name, node in fleet.nodes.items()
        for c in node["status"].get("conditions") or []
        if c.get("type") == kind
    }


async def test_a_unit_waits_for_its_notready_node_and_starts_whole_when_it_is_back(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    async with gang_rollout(skipping_client) as (fleet, names, profile, handle):
        held = await until_progress(
            handle, lambda p: waiting_for_unit(p) == {names[0], names[2]}, "the unit waiting for its node"
        )
        assert f"{names[1]} of its workload cannot start (NotReady" in held.waiting_reasons[names[0]], held
        shown = unit_wait_conditions(fleet, profile)
        assert set(shown) == {names[0], names[2]}, shown
        assert {(c["status"], c["reason"]) for c in shown.values()} == {("True", "WaitingForUnit")}
        message = shown[names[0]]["message"]
        assert all(n in message.partition(" since ")[0] for n in names[:3]), message
        assert f"{names[1]} of its workload cannot start (NotReady" in message
        await until_fleet(lambda: fleet.statuses.get(names[3]) == "Complete", "the idle node")
        assert fleet.started_nodes() == [names[3]]
        set_ready(fleet, names[1], ready=True)
        await time_skipping_env.sleep(timedelta(seconds=2 * SETTINGS.observe_interval_seconds))
        await until_progress(handle, lambda p: p.phase == "Complete", "Complete")
    batch = {s.node: s.batch for d in await decisions(skipping_client, handle) for s in d.decision.start}
    assert len({batch[n] for n in names[:3]}) == 1, batch
    assert unit_wait_conditions(fleet, profile) == {}


async def test_after_the_bound_a_unit_starts_without_its_notready_node(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    async with gang_rollout(skipping_client) as (fleet, names, profile, handle):
        await until_progress(handle, lambda p: bool(waiting_for_unit(p)), "the unit waiting for its node")
        assert set(unit_wait_conditions(fleet, profile)) == {names[0], names[2]}
        await until_fleet(lambda: fleet.statuses.get(names[3]) == "Complete", "the idle node")
        assert fleet.started_nodes() == [names[3]]
        await time_skipping_env.sleep(UNIT_WAIT + timedelta(minutes=1))
        await until_fleet(
            lambda: fleet.statuses.get(names[0]) == fleet.statuses.get(names[2]) == "Complete",
            "the unit's Ready nodes",
        )
        assert names[1] not in fleet.started_nodes()
        assert unit_wait_conditions(fleet, profile) == {}
    said = [d.decision.message for d in await decisions(skipping_client, handle)]
    assert any(f"starts without {names[1]} after waiting 30m" in m for m in said), said
