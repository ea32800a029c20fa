"""Maintenance windows: a five-field cron expression for when a window opens, a duration, and an
IANA time zone. Owns cron parsing and the two questions the rollout asks: how much of an open
window is left at ``now``, and when does the next window that can fit a given duration open.

Rules:
- cron fields are minute, hour, day of month, month, day of week (0 or 7 = Sunday; names such as
  ``mon`` and ``jan`` work); ``*``, lists, ranges and ``/step``. As in Vixie cron, when both day of
  month and day of week are restricted, a day matching either one fires.
- cron times are wall-clock times in the window's time zone. A start that falls into a
  spring-forward gap is shifted by the gap (02:30 becomes 03:30), a start inside a fall-back
  overlap fires once, at its first occurrence.
- a window lasts its duration in elapsed time, so a 4-hour window across a DST change is 4 real
  hours.
- a node starts only if its expected duration fits the rest of an open window.
No clock: every function takes ``now``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from functools import cached_property
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from fleetwright.planner.base import Frozen

_NAMES = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
    "sun": 0,
    "mon": 1,
    "tue": 2,
    "wed": 3,
    "thu": 4,
    "fri": 5,
    "sat": 6,
}
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
# How far to look for the next window: four years covers a Feb 29 schedule.
_SEARCH_DAYS = 4 * 366 + 1


class CronError(ValueError):
    pass


def _number(text: str, low: int, high: int, field: str) -> int:
    value = _NAMES.get(text.lower()) if not text.isdigit() else int(text)
    if value is None or not low <= value <= high:
        raise CronError(f"{field}: {text!r} is not in {low}-{high}")
    return value


def _parse_field(text: str, low: int, high: int, field: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise CronError(f"{field}: bad step in {part!r}")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            start, end = _number(a, low, high, field), _number(b, low, high, field)
            if start > end:
                raise CronError(f"{field}: empty range {base!r}")
        else:
            start = _number(base, low, high, field)
            end = high if step else start
        values.update(range(start, end + 1, step or 1))
    return frozenset(values)


class Cron:
    """A parsed five-field cron expression."""

    def __init__(self, expression: str) -> None:
        parts = expression.split()
        if len(parts) != len(_FIELDS):
            raise CronError(f"cron needs 5 fields (minute hour day month weekday), got {expression!r}")
        sets = [_parse_field(p, lo, hi, name) for p, (name, lo, hi) in zip(parts, _FIELDS, strict=True)]
        self.minutes = tuple(sorted(sets[0]))
        self.hours = tuple(sorted(sets[1]))
        self.days, self.months = sets[2], sets[3]
        self.weekdays = frozenset(d % 7 for d in sets[4])
        self.day_restricted = parts[2] != "*"
        self.weekday_restricted = parts[4] != "*"

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.day_restricted and self.weekday_restricted:
            return dom or dow
        return dom and dow

    def starts_on(self, day: date, zone: ZoneInfo) -> list[datetime]:
        """Every start on local ``day``, as aware UTC instants, sorted."""
        if not self.matches_day(day):
            return []
        starts = {
            datetime.combine(day, time(hour, minute), tzinfo=zone).astimezone(UTC)
            for hour in self.hours
            for minute in self.minutes
        }
        return sorted(starts)


class Window(Frozen):
    """A recurring maintenance window."""

    name: str = ""
    cron: str
    duration_seconds: int = Field(gt=0)
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        Cron(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _valid_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as err:
            raise ValueError(f"unknown time zone {value!r}") from err
        return value

    @cached_property
    def _cron(self) -> Cron:
        return Cron(self.cron)

    @cached_property
    def _zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def duration(self) -> timedelta:
        return timedelta(seconds=self.duration_seconds)

    def _days(self, start: date, step: int) -> Iterator[date]:
        for offset in range(_SEARCH_DAYS):
            yield start + timedelta(days=offset * step)

    def remaining(self, now: datetime) -> timedelta:
        """What is left of the window open at ``now`` (zero when none is open)."""
        latest: datetime | None = None
        earliest = now - self.duration
        first_day = earliest.astimezone(self._zone).date() - timedelta(days=1)
        day = now.astimezone(self._zone).date() + timedelta(days=1)
        while day >= first_day:
            for start in self._cron.starts_on(day, self._zone):
                if earliest < start <= now and (latest is None or start > latest):
                    latest = start
            day -= timedelta(days=1)
        if latest is None:
            return timedelta(0)
        return latest + self.duration - now

    def next_start(self, after: datetime) -> datetime | None:
        """The first start strictly after ``after``, or None if the cron never fires again."""
        day = after.astimezone(self._zone).date() - timedelta(days=1)
        for candidate_day in self._days(day, 1):
            later = [s for s in self._cron.starts_on(candidate_day, self._zone) if s > after]
            if later:
                return later[0]
        return None


def fits(windows: Sequence[Window], now: datetime, seconds: int) -> bool:
    """Whether work of ``seconds`` started at ``now`` ends inside an open window. No windows means
    always."""
    if not windows:
        return True
    needed = timedelta(seconds=seconds)
    return any(w.remaining(now) >= needed for w in windows)


def longest_remaining(windows: Sequence[Window], now: datetime) -> timedelta | None:
    """The most time any open window has left; None means no windows (unlimited)."""
    if not windows:
        return None
    return max(w.remaining(now) for w in windows)


def next_fit(windows: Sequence[Window], now: datetime, seconds: int) -> datetime | None:
    """The earliest instant >= ``now`` at which work of ``seconds`` fits a window; None if no
    window is ever long enough."""
    if fits(windows, now, seconds):
        return now
    candidates = [
        start for w in windows if w.duration_seconds >= seconds and (start := w.next_start(now)) is not None
    ]
    return min(candidates) if candidates else None


def ensure_aware(now: datetime) -> datetime:
    """Reject naive datetimes: a wall time without a zone cannot be placed in a window."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    return now
