"""A rollout workflow on the workflow tier: its input (a profile of its own), its start on a task
queue of its own, the run of a worker serving a fake fleet's activities beside it, and what the
tests read of it (its progress, the activities a node workflow scheduled). Waiting goes through
``tests.support.waiting``."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any, Protocol

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import Progress, RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.waiting import query_progress, until_progress

SETTINGS = EngineSettings(observe_interval_seconds=60, search_attributes=False)

Handle = WorkflowHandle[RolloutWorkflow, Progress]


class Fleet(Protocol):
    """What a worker serves: a fake fleet's activities (``tests.workflow.fakefleet``)."""

    def activities(self) -> list[Any]: ...


def unique() -> str:
    """A profile name per test, so node workflow ids never collide across tests."""
    return f"tuning-{uuid.uuid4().hex[:8]}"


def rollout_input(
    policy: DeploymentPolicy | None = None,
    *,
    name: str | None = None,
    interrupt: str | None = "reboot",
    settings: EngineSettings = SETTINGS,
) -> RolloutInput:
    """The rollout of a profile of its own (``unique`` unless ``name``) under ``policy`` (the
    example policy unless given)."""
    return RolloutInput(
        profile=examples.profile(name=name or unique(), interrupt=interrupt),
        policy=policy or examples.policy(),
        settings=settings,
    )


async def start(client: Client, fleet: Fleet, rollout: RolloutInput) -> tuple[Handle, str]:
    """Start ``rollout`` on a task queue of its own (returned) for a worker serving ``fleet``."""
    queue = f"tq-{uuid.uuid4()}"
    handle = await client.start_workflow(
        RolloutWorkflow.run,
        rollout,
        id=f"nodeprofile/{rollout.profile.metadata.name}-{uuid.uuid4()}",
        task_queue=queue,
    )
    return handle, queue


@contextlib.asynccontextmanager
async def running(client: Client, fleet: Fleet, rollout: RolloutInput) -> AsyncIterator[Handle]:
    """``rollout`` started, with a worker serving ``fleet`` while the block runs; on leaving, the
    workflow is terminated unless it ended by itself."""
    handle, queue = await start(client, fleet, rollout)
    async with build_worker(client, fleet.activities(), task_queue=queue):
        try:
            yield handle
        finally:
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test done")


async def progress(handle: Handle) -> Progress:
    """The rollout's published progress (it must have one)."""
    result = await query_progress(handle)
    assert result is not None
    return result


async def in_phase(handle: Handle, phase: str) -> Progress:
    return await until_progress(handle, lambda state: state.phase == phase, phase)


async def halted(handle: Handle) -> Progress:
    return await in_phase(handle, "Halted")


async def node_activities(client: Client, profile: str, node: str) -> list[str]:
    """The activity types a node workflow scheduled, in order."""
    history = await client.get_workflow_handle(node_workflow_id(profile, node)).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
