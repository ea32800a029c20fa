"""Which module defines each ``fleetwright`` command, and importing only what a run needs.

Every command module registers itself on the app when imported, and imports what its command
does (the clients, the local stack, the chaos suite, the worker) only when that command runs. A run
imports only the module of the command it invokes; the root ``--help`` (or an unknown command)
imports them all, so it lists every command. ``COMMANDS`` is the one
place that names them (a unit test holds it to what the modules register).

The lab commands (``LAB_COMMAND_MODULES``) drive the development modules ``fleetwright.lab``
names; an installation without them (the controller image) neither lists them nor imports their
modules, and a run of one ends with a one-line error (exit 2).

Owns that table and the imports; it must not know what a command does.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from fleetwright import lab

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
    "campaign": "campaign",
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
# The CLI modules that import the lab (a unit test holds this to their imports): the lab commands'
# and ``democampaign``, the demo's campaign.
LAB_COMMAND_MODULES = frozenset({"package", "cluster", "demo", "democampaign", "chaos"})
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
    """Import the module of the command ``argv`` invokes, or every command module; a lab command
    where the lab is not installed ends the run here (exit 2)."""
    command = invoked(argv)
    if command is None:
        return load_all()
    if COMMANDS[command] in LAB_COMMAND_MODULES and not lab.installed():
        print(not_shipped(command), file=sys.stderr)
        raise SystemExit(2)
    return [importlib.import_module(f"fleetwright.cli.{COMMANDS[command]}")]


def load_all() -> list[ModuleType]:
    """Import every command module (each registers its commands on the app), less the lab
    commands' where the lab is not installed."""
    names = set(COMMANDS.values())
    if not lab.installed():
        names -= LAB_COMMAND_MODULES
    return [importlib.import_module(f"fleetwright.cli.{name}") for name in sorted(names)]


def not_shipped(command: str) -> str:
    """The error for a lab command where the lab is not installed."""
    return (
        f"error: `fleetwright {command}` is a development command, not shipped in this installation (the "
        "controller image ships the runtime only); run it from a checkout installed with `pip install -e .`"
    )
