"""One digest per rollout generation (``image_pinning``): resolved once when the generation starts,
what every stage Job of it runs, kept across a tag pushed again and a worker that replays the
history, resolved again by a new generation; an unreachable registry holds the rollout named, a
missing image refuses the generation."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import DEFAULT_AGENT_IMAGE, EngineSettings
from fleetwright.workflows.payloads import RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import start
from tests.support.waiting import until, until_progress
from tests.workflow.fakefleet import FakeFleet
from tests.workflow.test_rollout_rollback import rollback_policy

pytestmark = pytest.mark.workflow

PINNING = EngineSettings(observe_interval_seconds=1, search_attributes=False, image_pinning=True)
TUNING = "ghcr.io/fleetwright/packages/tuning:1.0.0"
AGENT_REPO = DEFAULT_AGENT_IMAGE.rsplit(":", 1)[0]
FIXED = "sha256:" + "ab" * 32


def _rollout(profile: NodeProfile | None = None) -> RolloutInput:
    return RolloutInput(
        profile=profile or examples.profile(name=f"pin-{uuid.uuid4().hex[:8]}"),
        policy=examples.policy(max_unavailable=3),
        settings=PINNING,
    )


async def _complete(fleet: FakeFleet, size: int) -> None:
    await until(
        lambda: len(fleet.statuses) == size and set(fleet.statuses.values()) == {"Complete"},
        60.0,
        "every node complete",
        interval=0.05,
        blocking=False,
    )


async def test_a_generation_resolves_once_and_keeps_its_digests_when_the_tag_moves(client: Client) -> None:
    fleet = FakeFleet(size=4)
    first = fleet.registry.push(TUNING, "first build")
    agent = fleet.registry.push(DEFAULT_AGENT_IMAGE, "agent build")
    fleet.hold_stages = True
    handle, queue = await start(client, fleet, _rollout())
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(lambda: fleet.stage_requests, 30.0, "the canary's first stage", blocking=False)
        fleet.registry.push(TUNING, "second build, pushed mid-rollout")
        fleet.release.set()
        await _complete(fleet, 4)
        progress = await until_progress(handle, lambda p: p.phase == "Complete", "Complete")
    assert fleet.stage_images() == {f"ghcr.io/fleetwright/packages/tuning@{first}", f"{AGENT_REPO}@{agent}"}
    assert sorted(fleet.registry.asked) == sorted([TUNING, DEFAULT_AGENT_IMAGE])
    assert progress.images == {
        TUNING: f"ghcr.io/fleetwright/packages/tuning@{first}",
        DEFAULT_AGENT_IMAGE: f"{AGENT_REPO}@{agent}",
    }


async def test_a_worker_that_replays_the_history_does_not_resolve_again(client: Client) -> None:
    fleet = FakeFleet(size=3)
    fleet.hold_stages = True
    handle, queue = await start(client, fleet, _rollout())
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until(lambda: fleet.stage_requests, 30.0, "the canary's first stage", blocking=False)
    # A new worker has no cached run: it replays the history, where the resolution is recorded.
    fleet.release.set()
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await _complete(fleet, 3)
        await until_progress(handle, lambda p: p.phase == "Complete", "Complete")
    assert len(fleet.registry.asked) == 2  # the package and the agent, once


async def test_an_unreachable_registry_holds_the_rollout_named_then_it_proceeds(client: Client) -> None:
    fleet = FakeFleet(size=2)
    fleet.registry.reachable = False
    handle, queue = await start(client, fleet, _rollout())
    async with build_worker(client, fleet.activities(), task_queue=queue):
        waiting = await until_progress(
            handle, lambda p: p.message.startswith("ImageUnresolved: "), "the unresolved image shown"
        )
        assert waiting.phase == "Waiting"
        assert "registry.test unreachable" in waiting.message
        assert not fleet.stage_requests
        assert not fleet.cordoned()
        fleet.registry.reachable = True
        await _complete(fleet, 2)
    assert all("@sha256:" in image for image in fleet.stage_images())


async def test_a_missing_image_refuses_the_generation_and_a_new_one_resolves_again(client: Client) -> None:
    fleet = FakeFleet(size=2)
    fleet.registry.missing.add(TUNING)
    rollout = _rollout()
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        refused = await until_progress(handle, lambda p: p.phase == "Halted", "the generation refused")
        assert refused.message.startswith(f"ImageNotFound: {TUNING}: ")
        assert not fleet.stage_requests
        assert not fleet.cordoned()
        fleet.registry.missing.clear()
        fixed = examples.profile(name=rollout.profile.metadata.name, generation=2, version="1.0.0")
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=fixed, policy=rollout.policy))
        await _complete(fleet, 2)
    assert fleet.registry.asked.count(TUNING) == 2  # refused at generation 1, resolved at 2


async def test_references_given_by_digest_are_used_without_a_registry_call(client: Client) -> None:
    fleet = FakeFleet(size=2)
    pinned = examples.profile(name=f"pin-{uuid.uuid4().hex[:8]}")
    package = pinned.spec.packages[0].model_copy(update={"digest": FIXED})
    pinned = pinned.model_copy(update={"spec": pinned.spec.model_copy(update={"packages": [package]})})
    agent = f"{AGENT_REPO}@{FIXED}"
    rollout = _rollout(pinned).model_copy(
        update={"settings": PINNING.model_copy(update={"agent_image": agent})}
    )
    _, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await _complete(fleet, 2)
    assert fleet.registry.asked == []
    assert fleet.stage_images() == {f"ghcr.io/fleetwright/packages/tuning@{FIXED}", agent}


async def test_a_rollback_returns_to_the_digest_the_replaced_generation_pinned(client: Client) -> None:
    fleet = FakeFleet(size=4)
    first = fleet.registry.push(TUNING, "1.0.0 as the nodes ran it")
    name = f"pin-{uuid.uuid4().hex[:8]}"
    old = examples.profile(name=name, version="1.0.0", generation=1)
    new = examples.profile(name=name, version="1.1.0", generation=2)
    deployment = rollback_policy(2)
    handle, queue = await start(client, fleet, _rollout(old).model_copy(update={"policy": deployment}))
    started: list[str] = []

    def fails(request: StageRequest) -> bool:
        if request.package.version == "1.1.0" and request.node not in started:
            started.append(request.node)
        return request.package.version == "1.1.0" and started.index(request.node) == 1

    fleet.fails = fails
    async with build_worker(client, fleet.activities(), task_queue=queue):
        await until_progress(handle, lambda p: p.phase == "Complete", "generation 1 complete")
        fleet.registry.push(TUNING, "1.0.0 pushed again after the nodes ran it")
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=new, policy=deployment))
        await until_progress(handle, lambda p: p.phase == "RolledBack", "generation 2 rolled back")
    returned = [r for r in fleet.stage_requests if r.package.version == "1.0.0" and r.node in started]
    assert returned  # the rollback ran 1.0.0's stages again on the nodes 1.1.0 changed
    assert {r.package.digest for r in fleet.stage_requests if r.package.version == "1.0.0"} == {first}
    assert fleet.registry.asked.count(TUNING) == 1
