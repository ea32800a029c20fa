"""Supervision of the local control plane's child processes: start with a log file, stop, kill;
and running a tool (kubectl, ctr) to completion.

Children are put in their own session and get SIGKILL when the launcher process dies
(``PR_SET_PDEATHSIG``), so a crashed test run leaves no etcd or apiserver behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class RunAs:
    """The account a child runs as (a server that refuses to run as root); its group only."""

    user: str

    @property
    def popen_args(self) -> dict[str, Any]:
        entry = pwd.getpwnam(self.user)
        # The credentials change before preexec_fn runs, so the parent-death signal set there
        # survives it (a change of credentials clears one set earlier).
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def own(self, path: Path) -> None:
        entry = pwd.getpwnam(self.user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass
class Supervised:
    """One named child process and how to start it again."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    run_as: RunAs | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self.running:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, safe before exec
                **(self.run_as.popen_args if self.run_as else {}),
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def freeze(self) -> None:
        """SIGSTOP: it keeps its sockets but answers nothing (unreachable, not refused)."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after ``freeze``."""
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        if self.process and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would; used by chaos tests."""
        if self.process and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds."""
        if not self.process or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited with {self.process.returncode}; log tail:\n{self.log_tail()}"
            )


def wait_until(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    alive: Callable[[], None] | None = None,
) -> Any:
    """Poll ``predicate`` until it returns something truthy (and return that); fail naming
    ``what`` after ``timeout`` seconds. ``alive`` raises when what is awaited died. The one
    synchronous poller: the tests' ``wait_for`` is this."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive is not None:
            alive()
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def run_tool(
    argv: list[str],
    *,
    what: str,
    input: str | None = None,
    check: bool = True,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run a tool to completion with its output captured; with ``check``, a failure raises naming
    ``what`` (the command as a reader knows it) with the tool's stderr."""
    result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}): {result.stderr.strip()}")
    return result
