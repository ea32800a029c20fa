"""Regression tests for bugs the chaos suite found (fleetwright/chaos, docs/chaos.md).

Seeds 1000 and 4242, iteration 0 (kill -9 of the worker a few seconds after the apply): a worker
killed while it runs the rollout's observe-and-decide activity stalls the whole rollout for five
minutes with no visible reason, because that activity has a 5-minute start-to-close timeout and no
heartbeat, so Temporal notices the lost attempt only then. Every other activity is noticed within
60 s (API calls: 60 s start-to-close; long waits: 30 s heartbeat).

Deterministic: reads the activity options the workflow scheduled from its history.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fleetwright.activities.payloads import NAMES
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.payloads import RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

LOST_WORKER_NOTICED_WITHIN = timedelta(seconds=60)


async def test_a_worker_lost_during_observe_and_decide_is_noticed_within_a_minute(
    client: Client,
) -> None:
    name = f"tuning-{uuid.uuid4().hex[:8]}"
    fleet = FakeFleet(size=2)
    rollout = RolloutInput(
        profile=examples.profile(name=name),
        policy=examples.policy(max_unavailable=1),
        settings=EngineSettings(observe_interval_seconds=60, search_attributes=False),
    )
    queue = f"tq-{uuid.uuid4()}"
    handle = await client.start_workflow(
        RolloutWorkflow.run, rollout, id=f"nodeprofile/{name}", task_queue=queue
    )
    async with build_worker(client, fleet.activities(), task_queue=queue):
        for _ in range(100):
            if fleet.started_stages:
                break
            await asyncio.sleep(0.1)
        await handle.terminate("test done")
    scheduled = [
        event.activity_task_scheduled_event_attributes
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == NAMES.OBSERVE_AND_DECIDE
    ]
    assert scheduled, "the rollout never observed the fleet"
    attributes = scheduled[0]
    bounds = [
        attributes.start_to_close_timeout.ToTimedelta(),
        *([attributes.heartbeat_timeout.ToTimedelta()] if attributes.heartbeat_timeout.ToTimedelta() else []),
    ]
    assert min(bounds) <= LOST_WORKER_NOTICED_WITHIN, (
        f"a lost observe-and-decide attempt is noticed only after {min(bounds)}: the rollout stalls that long"
    )
