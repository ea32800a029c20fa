"""Maintenance windows end to end on the time-skipping server: outside its window a rollout waits,
naming the window, and starts nodes once the window (a cron schedule in its own time zone) opens."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.payloads import RolloutInput
from tests.support.rollouts import SETTINGS, start, unique
from tests.support.waiting import until, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

ZONE = "Asia/Tokyo"


def nightly(hour: int) -> DeploymentPolicy:
    """The example policy, allowed to change nodes two hours a day from ``hour``:00 in Tokyo."""
    deployment = examples.policy(max_unavailable=2)
    window = {"schedule": f"0 {hour} * * *", "durationSeconds": 2 * 3600, "timeZone": ZONE}
    spec = deployment.spec.model_validate({**deployment.spec.model_dump(by_alias=True), "windows": [window]})
    return deployment.model_copy(update={"spec": spec})


async def test_a_rollout_waits_for_its_window_and_starts_when_it_opens(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    client = skipping_client
    now = await time_skipping_env.get_current_time()
    # The window opens two to three hours from now, at the top of the hour in Tokyo.
    opens = (now.astimezone(ZoneInfo(ZONE)) + timedelta(hours=3)).hour
    fleet = FakeFleet(size=3)
    rollout = RolloutInput(profile=examples.profile(name=unique()), policy=nightly(opens), settings=SETTINGS)
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        waiting = await until_progress(handle, lambda p: p.phase == "Waiting", "Waiting")
        # The canary comes first: it waits for the window, and so does everything behind it.
        assert waiting.waiting_reasons, waiting
        assert all(r.startswith("OutsideWindow") for r in waiting.waiting_reasons.values()), waiting
        assert fleet.started_stages == []
        await time_skipping_env.sleep(timedelta(hours=1))
        assert fleet.started_stages == []
        await time_skipping_env.sleep(timedelta(hours=2, minutes=30))
        await until(
            lambda: list(fleet.statuses.values()).count("Complete") == 3,
            30.0,
            "the fleet",
            interval=0.05,
            blocking=False,
        )
        await until_progress(handle, lambda p: p.phase == "Complete", "Complete")
        await handle.terminate("test done")
