"""Structured logs for the fleetwright processes: one JSON object per line in a cluster (or
whenever stderr is not a terminal), a readable line on a terminal. Every record carries the
rollout context that applies to it: profile, node, stage, workflow id and run id.

The context comes from two places: Temporal's ``workflow.logger`` / ``activity.logger`` put the
workflow or activity info in the record's ``extra`` (``temporal_workflow`` / ``temporal_activity``),
and ``bind()`` sets context variables (the activity interceptor binds the profile, node and stage
of the request it runs). The workflow ids name the profile and node (``nodeprofile/<profile>``,
``node/<profile>/<node>``), so a workflow's own records need nothing bound.

Owns formatting and the root logger's configuration; it must not decide what is logged.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

CONTEXT_FIELDS = ("profile", "node", "stage", "package", "workflow_id", "run_id", "activity")
_bound: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "fleetwright_log", default=None
)
# Attributes every LogRecord has: anything else in __dict__ came in through ``extra``.
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


@contextlib.contextmanager
def bind(**fields: str | None) -> Iterator[None]:
    """Attach ``fields`` to every record logged in this context (task or thread)."""
    merged = {**(_bound.get() or {}), **{k: v for k, v in fields.items() if v}}
    token = _bound.set(merged)
    try:
        yield
    finally:
        _bound.reset(token)


def ids_from_workflow_id(workflow_id: str) -> dict[str, str]:
    """The profile and node a fleetwright workflow id names."""
    parts = workflow_id.split("/")
    if parts[0] == "nodeprofile" and len(parts) == 2:
        return {"profile": parts[1]}
    if parts[0] == "node" and len(parts) == 3:
        return {"profile": parts[1], "node": parts[2]}
    return {}


def context_of(record: logging.LogRecord) -> dict[str, str]:
    """The rollout context of one record: bound fields, then Temporal's workflow/activity info."""
    fields: dict[str, str] = {}
    temporal = getattr(record, "temporal_workflow", None) or getattr(record, "temporal_activity", None)
    if isinstance(temporal, Mapping):
        workflow_id = str(temporal.get("workflow_id") or "")
        if workflow_id:
            fields["workflow_id"] = workflow_id
            fields.update(ids_from_workflow_id(workflow_id))
        run_id = temporal.get("run_id") or temporal.get("workflow_run_id")
        if run_id:
            fields["run_id"] = str(run_id)
        if temporal.get("activity_type"):
            fields["activity"] = str(temporal["activity_type"])
    fields.update(_bound.get() or {})
    for name in CONTEXT_FIELDS:  # explicit extra={"node": ...} wins
        value = getattr(record, name, None)
        if value:
            fields[name] = str(value)
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the rollout context, the
    remaining ``extra`` fields and the exception, if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **context_of(record),
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD or key in entry or key.startswith("temporal_") or key in CONTEXT_FIELDS:
                continue
            entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger message  profile=.. node=..`` for a human on a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = context_of(record)
        # Temporal's loggers already append their info dict to the message; keep the line short.
        context.pop("run_id", None)
        if not context:
            return line
        first, _, rest = line.partition("\n")
        tail = " ".join(f"{k}={context[k]}" for k in CONTEXT_FIELDS if k in context)
        return f"{first}  {tail}" + (f"\n{rest}" if rest else "")


def wants_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "auto":
        return not stream.isatty()
    return log_format == "json"


def configure(log_format: str = "auto", level: str = "INFO", stream: TextIO | None = None) -> None:
    """Replace the root logger's handlers with one for ``stream`` (stderr) in the chosen format."""
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if wants_json(log_format, stream) else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
