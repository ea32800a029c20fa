"""Which module defines each ``fleetwright`` command, and importing only what a run needs.

Every command module registers itself on the app when imported, and imports what its command
does (the clients, the local stack, the chaos suite, the worker) only when that command runs. A run
imports only the module of the command it invokes; the root ``--help`` (or an unknown command)
imports them all, so it lists every command. ``COMMANDS`` is the one
place that names them (a unit test holds it to what the modules register).

Owns that table and the imports; it must not know what a command does.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

# command (or command group) -> the module under fleetwright.cli that registers it
COMMANDS = {
    "status": "status",
    "pause": "control",
    "resume": "control",
    "approve": "control",
    "retry-node": "control",
    "skip-node": "control",
    "release": "control",
    "abort": "control",
    "history": "history",
    "logs": "logs",
    "node": "node",
    "plan": "plan",
    "validate": "validate",
    "health-checks": "healthchecks",
    "package": "package",
    "cluster": "cluster",
    "demo": "demo",
    "chaos": "chaos",
    "worker": "serve",
    "controller": "serve",
    "webhook": "serve",
}
# The root options that take a value (``--kubeconfig PATH``): the token after one is no command.
VALUE_OPTIONS = frozenset({"--kubeconfig", "--temporal-address", "--temporal-namespace"})


def invoked(argv: Sequence[str]) -> str | None:
    """The command ``argv`` (without the program name) invokes, if it names a known one."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in VALUE_OPTIONS:
            skip = True
        elif not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def load(argv: Sequence[str]) -> list[ModuleType]:
    """Import the module of the command ``argv`` invokes, or every command module."""
    command = invoked(argv)
    if command is None:
        return load_all()
    return [importlib.import_module(f"fleetwright.cli.{COMMANDS[command]}")]


def load_all() -> list[ModuleType]:
    """Import every command module (each registers its commands on the app)."""
    return [importlib.import_module(f"fleetwright.cli.{name}") for name in sorted(set(COMMANDS.values()))]
