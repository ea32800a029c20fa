"""The agent's command line (docs/package-format.md §7) and process entry point.

It owns parsing ``<mode> <root> <copyDir> [interrupt-data]`` (and the legacy forms), exit code 2 for
a malformed invocation, the unknown-mode no-op, and installing the SIGTERM handler.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from fleetwright.agent import __version__, logs, signals
from fleetwright.agent.modes import ALL_MODES, INTERRUPT
from fleetwright.agent.run import Invocation, execute
from fleetwright.agent.settings import Settings, SettingsError

USAGE = (
    "usage: agent MODE ROOT_MOUNT COPY_DIR | agent interrupt ROOT_MOUNT COPY_DIR INTERRUPT_DATA\n"
    "       (legacy: agent MODE COPY_DIR | agent interrupt COPY_DIR INTERRUPT_DATA)"
)
DEFAULT_ROOT = "/root"
OK, USAGE_ERROR = 0, 2


class UsageError(Exception):
    pass


def parse(argv: Sequence[str]) -> Invocation:
    args = list(argv)
    if len(args) == 2:
        if args[0] == INTERRUPT:
            raise UsageError("interrupt needs COPY_DIR and INTERRUPT_DATA")
        inv = Invocation(args[0], DEFAULT_ROOT, args[1])
    elif len(args) == 3 and args[0] == INTERRUPT:
        inv = Invocation(INTERRUPT, DEFAULT_ROOT, args[1], args[2])
    elif len(args) == 3:
        inv = Invocation(args[0], args[1], args[2])
    elif len(args) == 4:
        if args[0] != INTERRUPT:
            raise UsageError(f"interrupt data is only accepted by the interrupt mode, not {args[0]!r}")
        inv = Invocation(*args)
    else:
        raise UsageError(f"expected 2 to 4 arguments, got {len(args)}")
    for label, path in (("ROOT_MOUNT", inv.root), ("COPY_DIR", inv.copy_dir)):
        if not os.path.isabs(path):
            raise UsageError(f"{label} must be an absolute path, got {path!r}")
    if inv.mode == INTERRUPT and not inv.interrupt_data:
        raise UsageError("INTERRUPT_DATA must not be empty")
    return inv


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        print(f"fleetwright-agent {__version__}")
        return OK
    try:
        inv = parse(args)
    except UsageError as exc:
        print(f"error: {exc}\n{USAGE}", file=sys.stderr)
        return USAGE_ERROR
    if inv.mode not in ALL_MODES:
        # A newer orchestrator may invoke modes this agent does not know: a successful no-op.
        logs.warn(f"unknown mode {inv.mode!r}: nothing to do")
        return OK
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        logs.error(str(exc))
        return 1
    signals.install()
    return execute(inv, settings, dict(os.environ))
