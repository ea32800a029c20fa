"""The fleet gate in the background of a batches step, on the workflow tier: its checks measure
over the canary while the first batch's nodes run (the rollout wakes for each measurement), a
failing one stops the second batch and, with ``action: rollback``, returns the canary and the
first batch; an Inconclusive one holds new batches, named, until a human approves the step; one
whose Prometheus does not answer holds them, named MonitoringUnavailable, until it answers.
Prometheus is faked behind the observe-and-decide activity; the real one is the integration
tier's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import in_phase, rollout_input, running, unique
from tests.support.waiting import until_grown, until_progress
from tests.workflow.fakefleet import FLEET_XID, FakeFleet, Outage, answer, xid_from_the_second

pytestmark = pytest.mark.workflow


def watched(check: dict[str, Any], *, action: str = "halt") -> DeploymentPolicy:
    """Canary 1, then batches of 2 whose fleet gate measures ``check`` in the background."""
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 2, "checks": [check["name"]]}},
    ]
    deployment = examples.policy(max_unavailable=2, steps=steps)
    spec = deployment.spec.model_dump(by_alias=True, exclude_none=True)
    spec |= {"healthChecks": [check], "failure": {"maxFailedNodes": 0, "action": action}}
    return deployment.model_copy(update={"spec": type(deployment.spec).model_validate(spec)})


async def test_a_background_check_failing_while_the_first_batch_runs_rolls_it_back(client: Client) -> None:
    fleet = FakeFleet(size=5)
    # The canary's stages run; every other node's wait until released: the first batch runs on.
    fleet.holds = lambda request: request.node != fleet.started_stages[0][0]
    seen: list[str] = []
    fleet.metric = xid_from_the_second(seen)
    name = unique()
    async with running(
        client, fleet, rollout_input(watched(FLEET_XID, action="rollback"), name=name)
    ) as handle:
        rolling = await in_phase(handle, "RollingBack")
        assert "batches rest: fleet gate failed: fleet-xid Failed (2/3, last Failed [2])" in rolling.message
        forward = fleet.started_nodes()
        assert len(forward) == 3  # the canary and the first batch, still running
        assert not fleet.release.is_set()
        fleet.release.set()
        done = await in_phase(handle, "RolledBack")
    assert done.rolled_back_generation is not None
    assert fleet.started_nodes() == forward  # the second batch never started
    returned = {r.node for r in fleet.stage_requests if r.stage.value == "uninstall"}
    assert returned == set(forward)  # the canary and the first batch went back
    canary = fleet.started_stages[0][0]
    assert all(f'Hostname=~"{canary}"' in promql for promql in seen)  # {{nodes}}: updated so far
    assert [m.phase.value for m in fleet.fleet_measured] == ["Successful", "Failed"]  # none in the rollback


async def test_an_inconclusive_background_check_holds_new_batches_until_approved(client: Client) -> None:
    fleet = FakeFleet(size=5)
    answers = iter([answer()])  # no data first: Inconclusive; then 0
    fleet.metric = lambda node, promql: next(answers, answer(0))
    name = unique()
    async with running(client, fleet, rollout_input(watched({**FLEET_XID, "count": 2}), name=name)) as handle:
        waiting = await until_progress(
            handle, lambda p: "fleet gate inconclusive" in p.message and p.updated == 3, "the hold"
        )
        assert "no new batch until `fleetwright approve <profile> default/rest`" in waiting.message
        await asyncio.sleep(2)
        assert len(fleet.started_nodes()) == 3  # held: the second batch waits for a human
        assert [m.phase.value for m in fleet.fleet_measured] == ["Inconclusive"]  # nothing re-measured
        await handle.execute_update(RolloutWorkflow.approve, "default/rest")
        done = await in_phase(handle, "Complete")
    assert done.updated == 5


async def test_a_background_check_without_answers_holds_new_batches_then_they_go_on_by_themselves(
    client: Client,
) -> None:
    fleet = FakeFleet(size=5)
    outage = Outage("unreachable: ReadTimeoutError")
    fleet.metric = outage
    name = unique()
    check = {**FLEET_XID, "count": 2, "consecutiveErrorLimit": 0}  # the first Error holds
    async with running(client, fleet, rollout_input(watched(check, action="rollback"), name=name)) as handle:
        held = await until_progress(
            handle,
            lambda p: "fleet gate MonitoringUnavailable" in p.message and p.updated == 3,
            "the batches held",
        )
        assert "no new batch until Prometheus answers" in held.message, held.message
        assert held.failed == 0
        await until_grown(fleet.fleet_measured, 2, "measurements while held")
        assert len(fleet.started_nodes()) == 3  # held: the second batch waits for an answer
        outage.down = False
        done = await in_phase(handle, "Complete")
    assert (done.updated, done.failed) == (5, 0)
    assert done.rolled_back_generation is None  # the failure action never fired
    assert "Successful" in [m.phase.value for m in fleet.fleet_measured]
