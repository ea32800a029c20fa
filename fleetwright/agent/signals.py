"""SIGTERM handling: finish the running step, start no other (docs/package-format.md §15).

It owns the one process-wide "stop requested" flag. It must never forward the signal to a step.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

_stop = threading.Event()


def _on_term(signum: int, frame: FrameType | None) -> None:
    _stop.set()


def install() -> None:
    signal.signal(signal.SIGTERM, _on_term)


def stop_requested() -> bool:
    return _stop.is_set()


def wait(seconds: float) -> bool:
    """Sleep up to ``seconds``; return True early when SIGTERM arrives."""
    return _stop.wait(seconds)


def reset() -> None:
    _stop.clear()
