"""Regression tests for bugs the chaos suite found (fleetwright/chaos, docs/chaos.md).

Seeds 1000 and 4242, iteration 0 (kill -9 of the worker a few seconds after the apply): a worker
killed while it runs the rollout's observe-and-decide activity stalls the whole rollout for five
minutes with no visible reason, because that activity has a 5-minute start-to-close timeout and no
heartbeat, so Temporal notices the lost attempt only then. Every other activity is noticed within
60 s (API calls: 60 s start-to-close; long waits: 30 s heartbeat).

Deterministic: reads the activity options the workflow scheduled from its history.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fleetwright.activities.payloads import NAMES
from fleetwright.local import examples
from tests.support.rollouts import rollout_input, running
from tests.support.waiting import until_fleet
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

LOST_WORKER_NOTICED_WITHIN = timedelta(seconds=60)


async def test_a_worker_lost_during_observe_and_decide_is_noticed_within_a_minute(
    client: Client,
) -> None:
    fleet = FakeFleet(size=2)
    async with running(client, fleet, rollout_input(examples.policy(max_unavailable=1))) as handle:
        await until_fleet(lambda: fleet.started_stages, "the first stage")
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
