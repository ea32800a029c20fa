"""A policy's ``allowedRegistries`` in the rollout engine: admission refuses a profile or policy
that breaks it, but a rollout whose package images are outside them anyway (the policy changed
while the webhook was down) is Halted before any node starts, naming the images and the field,
and goes on once a new spec brings them inside."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.payloads import RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import start
from tests.support.waiting import until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

SETTINGS = EngineSettings(observe_interval_seconds=1, search_attributes=False)


def _policy(*allowed: str) -> DeploymentPolicy:
    policy = examples.policy(max_unavailable=3)
    return policy.model_copy(
        update={"spec": policy.spec.model_copy(update={"allowed_registries": list(allowed)})}
    )


async def test_images_outside_the_allowed_registries_halt_before_any_node_then_a_fix_proceeds(
    client: Client,
) -> None:
    fleet = FakeFleet(size=2)
    profile = examples.profile(name=f"reg-{uuid.uuid4().hex[:8]}")  # ghcr.io/fleetwright/packages/tuning
    rollout = RolloutInput(profile=profile, policy=_policy("registry.internal:5000"), settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        halted = await until_progress(handle, lambda p: p.phase == "Halted", "the generation refused")
        assert halted.message == (
            "ImageRegistryNotAllowed: ghcr.io/fleetwright/packages/tuning: not from spec.allowedRegistries "
            "of DeploymentPolicy 'careful' (registry.internal:5000)"
        )
        assert not fleet.stage_requests
        assert not fleet.cordoned()
        fixed = _policy("registry.internal:5000", "ghcr.io/fleetwright")
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=profile, policy=fixed))
        await until_progress(handle, lambda p: p.phase == "Complete", "the rollout complete after the fix")
    assert fleet.stage_requests
