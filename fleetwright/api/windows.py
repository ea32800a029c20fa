"""Maintenance windows of a DeploymentPolicy: recurring windows (a cron schedule read in an IANA
time zone, and a length) in which nodes may start, and the checks of their schedule and zone.
Which window is open when is the planner's job. Must not do I/O.
"""

from __future__ import annotations

import re
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, Field

from fleetwright.api.common import ApiModel

MAX_WINDOWS = 16

_CRON_FIELD_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_CRON_NAMES: tuple[dict[str, int], ...] = (
    {},
    {},
    {},
    {
        m: i + 1
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        )
    },
    {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])},
)
_CRON_ITEM = re.compile(r"^(\*|[a-z0-9]+(-[a-z0-9]+)?)(/[0-9]+)?$")


def _cron_value(token: str, names: dict[str, int]) -> int:
    if token in names:
        return names[token]
    if not token.isdigit():
        raise ValueError(f"unknown value {token!r}")
    return int(token)


def _check_cron_field(field: str, bounds: tuple[int, int], names: dict[str, int]) -> None:
    low, high = bounds
    for item in field.lower().split(","):
        if not _CRON_ITEM.match(item):
            raise ValueError(f"invalid item {item!r}")
        span, _, step = item.partition("/")
        if step and int(step) == 0:
            raise ValueError(f"step must be >= 1 in {item!r}")
        if span == "*":
            continue
        values = [_cron_value(v, names) for v in span.split("-")]
        if any(v < low or v > high for v in values):
            raise ValueError(f"{item!r} is outside {low}-{high}")
        if len(values) == 2 and values[0] > values[1]:
            raise ValueError(f"range {item!r} is reversed")


def check_cron(expr: str) -> str:
    """Validate a 5-field cron expression (minute hour day-of-month month day-of-week)."""
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(
            f"must have 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    for field, bounds, names in zip(fields, _CRON_FIELD_RANGES, _CRON_NAMES, strict=True):
        _check_cron_field(field, bounds, names)
    return expr


def check_time_zone(name: str) -> str:
    """Validate an IANA time zone name such as Europe/Berlin."""
    if name.startswith(("/", ".")) or ".." in name:
        raise ValueError(f"{name!r} is not an IANA time zone name")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin)") from exc
    return name


class MaintenanceWindow(ApiModel):
    """A recurring window in which nodes may start; a node that cannot finish in the window does not start."""

    schedule: Annotated[str, AfterValidator(check_cron)] = Field(
        description="Cron expression (5 fields: minute hour day-of-month month day-of-week) for the "
        "window's start.",
        min_length=9,
        max_length=128,
    )
    duration_seconds: int = Field(description="Length of the window.", ge=60, le=7 * 86400)
    time_zone: Annotated[str, AfterValidator(check_time_zone)] = Field(
        default="UTC",
        description="IANA time zone the schedule is read in, e.g. Europe/Berlin.",
        min_length=1,
        max_length=64,
    )
