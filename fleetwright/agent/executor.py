"""Runs one command on the host: in a chroot of the root mount, streaming its output
(docs/package-format.md §9.2, §14).

It owns process creation, the chroot and working directory, and copying stdout/stderr to the
pod log (timestamped, ``[out]``/``[err]``) and to the host log files. It does not interpret exit
codes; callers compare them with their allowed return codes.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TextIO

from fleetwright.agent import logs


@dataclass(frozen=True)
class ProcessOutcome:
    """``returncode`` is negative when a signal killed the process; None when it never started."""

    returncode: int | None
    error: str | None = None


def _pump(source: IO[bytes], tag: str, sink: TextIO | None) -> None:
    for raw in iter(source.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        logs.say(f"[{tag}] {line}")
        if sink is not None:
            sink.write(line + "\n")
            sink.flush()
    source.close()


def _enter(root: str, cwd: str) -> Callable[[], None]:
    def enter() -> None:  # runs in the child between fork and exec
        os.chroot(root)
        os.chdir(cwd)

    return enter


def run(
    argv: Sequence[str],
    *,
    root: str,
    cwd: str,
    env: Mapping[str, str],
    log_base: str | None = None,
) -> ProcessOutcome:
    """Run ``argv`` (a path inside the chroot of ``root``) and wait for it.

    ``cwd`` is a host path. A missing working directory falls back to ``/`` with a warning,
    because a failing ``chdir`` in the child would surface only as an opaque "preexec_fn" error.
    """
    seen_cwd = os.path.join(root, cwd.lstrip("/"))
    if not os.path.isdir(seen_cwd):
        logs.warn(f"working directory {cwd} does not exist; using /")
        cwd = "/"
    sinks: tuple[TextIO | None, TextIO | None] = (None, None)
    if log_base is not None:
        sinks = logs.open_pair(log_base)
    try:
        return _spawn(argv, root=root, cwd=cwd, env=env, sinks=sinks)
    finally:
        for sink in sinks:
            if sink is not None:
                sink.close()
        if log_base is not None:
            logs.prune(log_base)


def _spawn(
    argv: Sequence[str],
    *,
    root: str,
    cwd: str,
    env: Mapping[str, str],
    sinks: tuple[TextIO | None, TextIO | None],
) -> ProcessOutcome:
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            # preexec_fn is the only way to chroot the child; the pump threads of earlier
            # steps have all been joined, so no other thread holds a lock at fork time.
            preexec_fn=_enter(root, cwd),  # noqa: PLW1509
            # Own process group: a signal aimed at the agent's group must not hit the step,
            # because SIGTERM means "finish the running step, start no other".
            process_group=0,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return ProcessOutcome(None, f"cannot execute {argv[0]}: {exc}")
    assert proc.stdout is not None
    assert proc.stderr is not None
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, "out", sinks[0]), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "err", sinks[1]), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    # SIGTERM does not interrupt this wait: its handler only sets a flag and wait() retries EINTR.
    code = proc.wait()
    for pump in pumps:
        pump.join()
    return ProcessOutcome(code)
