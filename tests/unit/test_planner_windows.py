"""Maintenance windows: cron in a time zone, DST gaps and overlaps, and the fit rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.planner.policy.windows import Cron, CronError, Window, fits, next_fit

pytestmark = pytest.mark.unit


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_a_berlin_window_follows_summer_time() -> None:
    window = Window(cron="0 22 * * *", duration_seconds=4 * 3600, timezone="Europe/Berlin")
    # 2026-03-29 is the switch to CEST (UTC+2): 22:00 local is 21:00Z before and 20:00Z after.
    assert window.next_start(utc(2026, 3, 28, 12)) == utc(2026, 3, 28, 21)
    assert window.next_start(utc(2026, 3, 29, 12)) == utc(2026, 3, 29, 20)
    assert window.remaining(utc(2026, 3, 29, 23)) == timedelta(hours=1)
    assert window.remaining(utc(2026, 3, 30, 0, 30)) == timedelta(0)


def test_a_start_inside_the_spring_forward_gap_is_shifted_by_the_gap() -> None:
    window = Window(cron="30 2 * * *", duration_seconds=3600, timezone="America/New_York")
    # 02:30 does not exist on 2026-03-08 in New York: it becomes 03:30 EDT (07:30Z).
    assert window.next_start(utc(2026, 3, 8, 0)) == utc(2026, 3, 8, 7, 30)
    assert window.next_start(utc(2026, 3, 8, 8)) == utc(2026, 3, 9, 6, 30)


def test_a_start_inside_the_fall_back_overlap_fires_once_and_lasts_real_time() -> None:
    window = Window(cron="30 1 * * *", duration_seconds=2 * 3600, timezone="America/New_York")
    first = window.next_start(utc(2026, 11, 1, 0))
    assert first == utc(2026, 11, 1, 5, 30)  # 01:30 EDT, the first occurrence
    assert window.next_start(first) == utc(2026, 11, 2, 6, 30)  # the repeated 01:30 EST does not fire
    # Two real hours, although the wall clock only moves one hour forward meanwhile.
    assert window.remaining(utc(2026, 11, 1, 7, 0)) == timedelta(minutes=30)


def test_day_of_month_and_day_of_week_are_ored_when_both_are_restricted() -> None:
    cron = Cron("0 0 13 * fri")
    assert cron.matches_day(datetime(2026, 2, 13).date())  # a Friday the 13th
    assert cron.matches_day(datetime(2026, 2, 20).date())  # any Friday
    assert cron.matches_day(datetime(2026, 5, 13).date())  # any 13th (a Wednesday)
    assert not cron.matches_day(datetime(2026, 5, 14).date())


@pytest.mark.parametrize(
    "bad", ["* * * *", "60 * * * *", "* 24 * * *", "5-1 * * * *", "*/0 * * * *", "x * * * *"]
)
def test_bad_cron_is_rejected(bad: str) -> None:
    with pytest.raises(CronError):
        Cron(bad)


def test_fits_needs_the_whole_duration_inside_one_open_window() -> None:
    windows = (Window(cron="0 1 * * *", duration_seconds=3600, timezone="UTC"),)
    assert fits(windows, utc(2026, 1, 1, 1, 0), 3600)
    assert not fits(windows, utc(2026, 1, 1, 1, 1), 3600)
    assert fits(windows, utc(2026, 1, 1, 1, 59), 60)
    assert not fits(windows, utc(2026, 1, 1, 2, 0), 1)
    assert fits((), utc(2026, 1, 1), 10**6)  # no windows: any time
    assert next_fit(windows, utc(2026, 1, 1, 1, 30), 3600) == utc(2026, 1, 2, 1, 0)
    assert next_fit(windows, utc(2026, 1, 1, 1, 30), 7200) is None  # longer than every window


ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]


@settings(max_examples=120, deadline=None)
@given(
    minute=st.integers(0, 59),
    hour=st.integers(0, 23),
    weekday=st.sampled_from(["*", "mon-fri", "sat,sun", "3"]),
    hours=st.integers(1, 30),
    zone=st.sampled_from(ZONES),
    offset=st.integers(0, 366 * 24 * 60),
    needed=st.integers(60, 30 * 3600),
)
def test_fit_is_exactly_remaining_time_of_a_started_window(
    minute: int, hour: int, weekday: str, hours: int, zone: str, offset: int, needed: int
) -> None:
    window = Window(cron=f"{minute} {hour} * * {weekday}", duration_seconds=hours * 3600, timezone=zone)
    now = utc(2026, 1, 1) + timedelta(minutes=offset)
    left = window.remaining(now)
    if left > timedelta(0):
        # The window that is open started within its duration before now, at a real start time.
        start = now + left - window.duration
        assert window.next_start(start - timedelta(seconds=1)) == start
        assert start <= now
    assert fits((window,), now, needed) == (left >= timedelta(seconds=needed))
    nxt = window.next_start(now)
    assert nxt is not None
    assert nxt > now
    assert window.remaining(nxt) == window.duration
    opens = next_fit((window,), now, needed)
    if needed <= window.duration_seconds:
        assert opens is not None
        assert fits((window,), opens, needed)
        assert opens >= now
