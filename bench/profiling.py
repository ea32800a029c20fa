"""Where the bench's fleetwright Python processes spend their CPU: py-spy samples each of them
(the workers and the controller) while the rollout runs, and the report lists, per process, the
functions most of its busy samples were in.

py-spy reads the sampled process's memory from outside (``--nonblocking``: it never pauses it), so
the process's own CPU figures stay comparable; py-spy's CPU is its own. Samples whose innermost
frame waits (a socket read, a select, a lock) are not busy. The SDK's Rust threads are not Python
and are not sampled (a small share of each worker: their threads' CPU is in /proc).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import IO

RATE = 50
"""Samples per second."""
# Innermost frames that wait rather than compute.
IDLE = ("SSLSocket.read", "recv_into", "readinto", "select (", "acquire", "wait (threading", "sleep")
# Frames every busy stack passes through, which say nothing about where the CPU went.
GENERIC = re.compile(
    r"^(<module>|run|run_and_exit|serve|_bootstrap|_bootstrap_inner|_worker|_run_once|run_forever|"
    r"run_until_complete|_run|wrapper_function|__call__|call|call_api|request|urlopen) \("
    r"|\((threading|asyncio/|concurrent/|selectors|contextlib|runpy|serve\.py)"
)
# What costs the most in the libraries, by the frame that owns it (the first of its kind).
LIBRARY_WORK = {
    "Kubernetes client calls": "ValidateCallWrapper.__call__",
    "building the client's models": "ApiClient.deserialize",
    "JSON decoding": "JSONDecoder.decode",
    "Temporal workflow activations": "_WorkflowWorker._handle_activation",
    "Temporal payload conversion": "PayloadVisitor.visit",
}
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
ROOT = str(Path(__file__).resolve().parents[1]) + "/"
OWN_PACKAGES = frozenset({"fleetwright", "activities", "workflows", "worker", "agent"})


class Profiles:
    """py-spy recordings of ``pids`` (name -> pid) into ``directory``, from ``start`` to ``stop``."""

    def __init__(self, pids: dict[str, int], directory: Path) -> None:
        self.pids, self.directory = pids, directory
        self.recorders: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        spy = Path(sys.executable).parent / "py-spy"
        for name, pid in self.pids.items():
            argv = [str(spy), "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw"]
            argv += ["--nonblocking", "--output", str(self.path(name))]
            log = (self.directory / f"{name}.log").open("wb")
            self._logs.append(log)
            self.recorders[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        """Ends each recording (py-spy writes its samples when interrupted)."""
        for recorder in self.recorders.values():
            recorder.send_signal(signal.SIGINT)
        for recorder in self.recorders.values():
            recorder.wait(timeout=60)
        for log in self._logs:
            log.close()

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.txt"

    def lines(self, top: int = 12) -> list[str]:
        lines = [f"where the CPU went (py-spy, {RATE} samples/s; share of busy samples on each stack):"]
        for name in self.recorders:
            busy, functions = busy_functions(self.path(name))
            share = {f: 100 * n / max(busy, 1) for f, n in functions.items()}
            lines.append(f"  {name}: {busy / RATE:.1f} s busy; fleetwright's functions:")
            ours = sorted((f for f in share if _ours(f)), key=lambda f: -share[f])[:top]
            lines += [f"    {share[f]:5.1f}%  {f}" for f in ours]
            libraries = {
                label: sum(v for f, v in share.items() if f.startswith(marker + " "))
                for label, marker in LIBRARY_WORK.items()
            }
            lines.append("    in libraries: " + ", ".join(f"{k} {v:.1f}%" for k, v in libraries.items()))
        lines.append(f"  raw samples (collapsed stacks): {self.directory}")
        return lines


def busy_functions(path: Path) -> tuple[int, Counter[str]]:
    """Busy samples in a py-spy raw file, and how many of them each function was on the stack of."""
    busy, functions = 0, Counter[str]()
    if not path.exists():
        return busy, functions
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or any(mark in frames[-1] for mark in IDLE) or "importlib" in stack:
            continue
        busy += int(count)
        for frame in {_name(frame) for frame in frames}:
            if not GENERIC.search(frame):
                functions[frame] += int(count)
    return busy, functions


def _ours(function: str) -> bool:
    """A frame in the repository's own code (``_name`` made its file repository-relative)."""
    file = function.rpartition(" (")[2]
    return file.split("/")[0] in OWN_PACKAGES


def _name(frame: str) -> str:
    """``function (file)``, the file shortened to its package path."""
    match = _FRAME.match(frame)
    if match is None:
        return frame
    file = match["file"].split("site-packages/")[-1].removeprefix(ROOT)
    return f"{match['function']} ({file})"
