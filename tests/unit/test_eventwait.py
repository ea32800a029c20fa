"""The processes' timed wait on an event: True once set, False after the seconds, and a cancel of
the waiter always ends it, also one that lands as the event fires (which Python 3.11's
``asyncio.wait_for`` drops, leaving a stopped controller's loop running)."""

from __future__ import annotations

import asyncio

import pytest

from fleetwright.eventwait import wait_event

pytestmark = pytest.mark.unit


async def test_a_set_event_ends_the_wait_with_true() -> None:
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, 5) is True


async def test_a_wait_that_runs_out_returns_false_and_leaves_no_task() -> None:
    before = len(asyncio.all_tasks())
    assert await wait_event(asyncio.Event(), 0.01) is False
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == before


async def test_a_cancel_that_lands_as_the_event_fires_still_cancels_the_waiter() -> None:
    event = asyncio.Event()
    waiting = asyncio.create_task(wait_event(event, 10))
    await asyncio.sleep(0.01)
    event.set()
    await asyncio.sleep(0)  # the event's own wait has ended; the waiter has not resumed yet
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
