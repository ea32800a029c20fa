"""Timestamped agent output (the pod log) and the per-step host log files with retention
(docs/package-format.md §14).

It owns the console line format, the host log file names and pruning. It must not decide what
runs: callers hand it lines and file names.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import sys
import threading
from typing import TextIO

KEEP_LOGS = 5
_LOCK = threading.Lock()


def now_local() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="milliseconds")


def say(message: str, level: str = "INFO", stream: TextIO | None = None) -> None:
    """One timestamped line to the pod log. Thread-safe: step output is read by two threads."""
    out = stream if stream is not None else sys.stdout
    with _LOCK:
        out.write(f"{now_local()} {level} {message}\n")
        out.flush()


def warn(message: str) -> None:
    say(message, "WARNING")


def error(message: str) -> None:
    say(message, "ERROR")


def utc_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d-%H%M%S")


def step_log_base(log_root: str, package: str, version: str, step_path: str) -> str:
    """``<log root>/<pkg>/<ver>/<step path>``; the caller appends ``-<stamp>.log``."""
    return os.path.join(log_root, package, version, step_path)


def open_pair(base: str) -> tuple[TextIO, TextIO]:
    """Open ``<base>-<UTC stamp>.log`` (stdout) and its ``.log.err`` sibling (stderr)."""
    os.makedirs(os.path.dirname(base), exist_ok=True)
    name = f"{base}-{utc_stamp()}.log"
    # Append: two runs in the same second share a name and must not erase each other.
    return open(name, "a", encoding="utf-8"), open(f"{name}.err", "a", encoding="utf-8")


def prune(base: str, keep: int = KEEP_LOGS) -> list[str]:
    """Keep the ``keep`` newest ``<base>-*.log`` files; delete older ones with their ``.err``.

    The v6 agent pruned only ``.log`` and let ``.log.err`` grow forever; we prune them together.
    """
    logs = sorted(glob.glob(glob.escape(base) + "-*.log"), key=os.path.getmtime, reverse=True)
    removed = []
    for old in logs[keep:]:
        for path in (old, f"{old}.err"):
            try:
                os.remove(path)
                removed.append(path)
            except FileNotFoundError:
                pass
    return removed
