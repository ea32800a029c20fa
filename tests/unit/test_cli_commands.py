"""The command table the entry point loads lazily: it names every command the modules register,
each in the module that registers it, and a run imports only its command's module; no command
module imports the Temporal or Kubernetes clients before its command runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleetwright.cli.app import app
from fleetwright.cli.commands import COMMANDS, invoked, load_all

pytestmark = pytest.mark.unit


def registered() -> dict[str, str]:
    """command -> the module that registered it, read from the app after importing every module."""
    load_all()
    names = {c.name or "": c.callback.__module__ for c in app.registered_commands if c.callback}
    for group in app.registered_groups:
        typer_app = group.typer_instance
        assert typer_app is not None
        modules = {c.callback.__module__ for c in typer_app.registered_commands if c.callback}
        assert len(modules) == 1
        names[group.name or ""] = modules.pop()
    return {name: module.removeprefix("fleetwright.cli.") for name, module in names.items()}


def test_the_table_names_every_registered_command_in_its_module() -> None:
    assert registered() == COMMANDS


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["status", "gpu"], "status"),
        (["--kubeconfig", "status", "pause", "gpu"], "pause"),  # a value that looks like a command
        (["--temporal-address=127.0.0.1:7233", "node", "reset"], "node"),
        (["--help"], None),
        ([], None),
        (["no-such-command"], None),
    ],
)
def test_the_invoked_command_is_found_past_the_root_options(argv: list[str], command: str | None) -> None:
    assert invoked(argv) == command


HEAVY = ("fleetwright.chaos", "fleetwright.localstack", "fleetwright.localcluster", "fleetwright.packagetest")
# What only the processes need: the worker's workflows and tracing, the controller, the webhook.
WORKER_ONLY = ("fleetwright.worker.temporal", "fleetwright.worker.controller", "fleetwright.worker.webhook")


def test_a_status_run_imports_neither_the_local_stack_nor_the_chaos_suite_nor_the_worker() -> None:
    probe = (
        "import sys\n"
        "from fleetwright.cli.commands import load\n"
        "load(['status', 'gpu'])\n"
        f"print(sorted(m for m in sys.modules if m.startswith({HEAVY + WORKER_ONLY!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout


# What a command imports when it runs, never to list or parse its options: the clients, the
# Temporal payloads, the Kubernetes adapter and the stacks the local commands start. (The chaos
# command's fault kinds and the package tooling are standard library only: their options need them.)
WHEN_RUN = (
    "temporalio",
    "kubernetes",
    "fleetwright.workflows.payloads",
    "fleetwright.kube",
    "fleetwright.localstack",
    "fleetwright.localcluster",
    "fleetwright.chaos.stack",
    "fleetwright.chaos.runner",
)


def test_the_entry_point_and_every_command_module_import_no_client() -> None:
    probe = (
        "import sys\n"
        "import fleetwright.cli.main\n"
        "from fleetwright.cli.commands import load_all\n"
        "load_all()\n"
        f"print(sorted(m for m in sys.modules if m.startswith({WHEN_RUN + WORKER_ONLY!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout
