"""How a fleetwright process stops: SIGTERM or SIGINT as an asyncio event for the long-running
processes, and one exit path for every ``fleetwright`` command.

The exit skips the interpreter's finalization. The Temporal SDK's native runtime keeps its own
threads (Tokio) that acquire the GIL for callbacks; when one does so while the main thread is
finalizing the interpreter, CPython aborts the process ("PyGILState_Release: thread state ... must
be current when releasing", exit -6): a crash on pod termination, seen a few times in a hundred
stops of a worker. The runtime offers no shutdown to wait for, so once the command's own clean-up
has run (workers drained, context managers exited, spans flushed), the process flushes its streams
and ends with ``os._exit``: nothing is left that finalization would still do for us.

Owns signal wiring and the process exit; it must not know what a process does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM (the kubelet stopping the pod) or SIGINT (Ctrl-C); call it from the
    running event loop before the process starts its work."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def exit_code(error: SystemExit) -> int:
    """The status ``sys.exit(code)`` asks for (a message means 1, as the interpreter does)."""
    if error.code is None:
        return 0
    if isinstance(error.code, int):
        return error.code
    print(error.code, file=sys.stderr)
    return 1


def run_and_exit(command: Callable[[], object]) -> NoReturn:
    """Run ``command`` (which may ``sys.exit``), flush, and end the process without finalization."""
    try:
        command()
        code = 0
    except SystemExit as error:
        code = exit_code(error)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe: nothing more can reach it anyway.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
