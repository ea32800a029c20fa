"""The tests' one way to wait (``tests.support.waiting``): from synchronous code and from the event
loop alike, a probe's first truthy value is returned, and a wait that runs out fails the same way,
naming what it waited for."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.support.waiting import until, until_grown, wait_for

pytestmark = pytest.mark.unit


def test_both_waits_return_the_first_truthy_value() -> None:
    counts = itertools.count()
    assert wait_for(lambda: next(counts) >= 2 and "ready", 5, "the count", interval=0.01) == "ready"
    again = itertools.count()
    found = asyncio.run(until(lambda: next(again) >= 2 and "ready", 5, "the count", interval=0.01))
    assert found == "ready"


def test_both_waits_fail_alike_naming_what_never_came() -> None:
    with pytest.raises(TimeoutError, match="timed out after 0s waiting for the green light"):
        wait_for(lambda: False, 0.05, "the green light", interval=0.01)
    with pytest.raises(TimeoutError, match="timed out after 0s waiting for the green light"):
        asyncio.run(until(lambda: False, 0.05, "the green light", interval=0.01))


def test_both_waits_add_the_details_asked_for_to_a_timeout() -> None:
    with pytest.raises(TimeoutError, match=r"waiting for the green light \(still red\)"):
        wait_for(lambda: False, 0.05, "the green light", interval=0.01, details=lambda: "still red")
    with pytest.raises(TimeoutError, match=r"waiting for the green light \(last: False; still red\)"):
        asyncio.run(until(lambda: False, 0.05, "the green light", interval=0.01, details=lambda: "still red"))


def test_a_record_that_does_not_grow_fails_naming_it() -> None:
    with pytest.raises(TimeoutError, match="waiting for measurements while held"):
        asyncio.run(until_grown([1, 2], 1, "measurements while held", within=0.05))
