"""Waiting on an ``asyncio.Event`` for at most some seconds, the one way the processes' loops do it.

Python 3.11's ``asyncio.wait_for`` drops a cancel that lands while the awaited event fires: the
caller returns as if the event were set and goes on looping, so a task its owner cancelled (a
controller stopping, an activity cancelled) runs on. ``asyncio.wait`` never swallows the caller's
cancel. Owns that wait only; it must not know what the event means.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``; a cancel of the caller always propagates."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
    return bool(done)
