"""The start and stop protocol of the local services (the control plane, the Temporal servers,
the local stack): a context manager whose failed start stops whatever it had started, the time a
start took, and a work directory that is a temporary one, removed on stop, unless the caller
named one (which is kept).

Owns that protocol only; what a service starts and stops, and in which order, is its own
(``_start`` and ``_stop``).
"""

from __future__ import annotations

import abc
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self


class Launcher(abc.ABC):
    startup_seconds: float = 0.0
    """How long the last ``start`` took."""
    _scratch: Path | None = None
    """The temporary work directory this service made, removed on stop; None when it was given."""

    def _work_directory(self, given: Path | None, prefix: str) -> Path:
        """``given`` (created if missing, kept afterwards), or a new temporary directory."""
        if given is None:
            self._scratch = Path(tempfile.mkdtemp(prefix=prefix))
            return self._scratch
        given.mkdir(parents=True, exist_ok=True)
        return given

    @property
    def owns_workdir(self) -> bool:
        return self._scratch is not None

    @abc.abstractmethod
    def _start(self) -> None:
        """Start everything, in dependency order."""

    @abc.abstractmethod
    def _stop(self) -> None:
        """Stop whatever is running (also after a partial start); idempotent."""

    def start(self) -> None:
        started = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def stop(self) -> None:
        self._stop()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
