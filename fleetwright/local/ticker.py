"""A background ticker: calls a function every few seconds on a daemon thread while a ``with``
block runs. The simulated kubelet and the tests' invariant samplers both poll the cluster so."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType


class Ticker:
    def __init__(self, tick: Callable[[], None], interval: float, name: str = "ticker") -> None:
        self._tick = tick
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._tick()
            self._stop.wait(self._interval)
