"""One task reconciles profiles: the status mirror never starts or signals a rollout itself, it asks
the event consumer to retry the starts that failed, so two reconciles of one profile cannot
interleave (and signal an older spec after a newer one)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from fleetwright.controller.reconcile import Controller
from fleetwright.workflows.payloads import RolloutInput
from tests.unit.test_controller_abort import NAME, FakeTemporal, controller, profile_obj, temporal

pytestmark = pytest.mark.unit
__all__ = ["temporal"]  # the fixture, used by name


async def mirrored_once(running: Controller) -> list[str]:
    """Run the mirror loop for one pass; the profiles it mirrored."""
    mirrored: list[str] = []
    passed = asyncio.Event()

    async def mirror(name: str) -> None:
        mirrored.append(name)
        passed.set()

    running.mirror = mirror  # type: ignore[method-assign]
    task = asyncio.create_task(running._mirror_loop())
    await asyncio.wait_for(passed.wait(), timeout=5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return mirrored


async def test_the_mirror_asks_the_consumer_to_retry_a_failed_start(temporal: FakeTemporal) -> None:
    running = controller(temporal)
    running.profiles[NAME] = profile_obj(3)  # listed, never started (its start failed)
    assert await mirrored_once(running) == [NAME]
    assert temporal.started == []  # the mirror did not reconcile
    started = asyncio.Event()
    start = temporal.start_workflow

    async def start_and_tell(run: Any, rollout: RolloutInput, **options: Any) -> FakeTemporal:
        started.set()
        return await start(run, rollout, **options)

    temporal.start_workflow = start_and_tell  # type: ignore[method-assign]
    consumer = asyncio.create_task(running._consume())
    await asyncio.wait_for(started.wait(), timeout=5)
    consumer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consumer
    assert [r.profile.metadata.generation for r in temporal.started] == [3]


async def test_a_started_profile_is_not_retried(temporal: FakeTemporal) -> None:
    running = controller(temporal)
    running.profiles[NAME] = profile_obj(3)
    await running._reconcile(NAME)
    assert await mirrored_once(running) == [NAME]
    assert running._events.empty()
