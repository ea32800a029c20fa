"""The command table the entry point loads lazily: it names every command the modules register,
each in the module that registers it, and a run imports only its command's module; no command
module imports the Temporal or Kubernetes clients before its command runs. Without the lab (the
controller image), the lab commands are neither listed nor imported, and running one exits 2."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright import lab
from fleetwright.cli.app import app
from fleetwright.cli.commands import COMMANDS, LAB_COMMAND_MODULES, invoked, load, load_all, not_shipped

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


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


HEAVY = ("fleetwright.chaos", "fleetwright.local", "fleetwright.packagetest")
# What only the processes need: the worker's workflows and tracing, the controller, the webhook.
WORKER_ONLY = (
    "fleetwright.worker.temporalworker",
    "fleetwright.controller.reconcile",
    "fleetwright.webhook",
)


def imported(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with one of ``prefixes`` that a fresh interpreter imports for ``code``."""
    probe = f"import sys\n{code}\nprint(sorted(m for m in sys.modules if m.startswith({prefixes!r})))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    found: list[str] = ast.literal_eval(out.stdout.strip())
    return found


def test_a_status_run_imports_neither_the_local_stack_nor_the_chaos_suite_nor_the_worker() -> None:
    code = "from fleetwright.cli.commands import load\nload(['status', 'gpu'])"
    assert imported(code, HEAVY + WORKER_ONLY) == []


# What a command imports when it runs, never to list or parse its options: the clients, the
# Temporal payloads, the Kubernetes adapter and the stacks the local commands start. (The chaos
# command's fault kinds and the package tooling are standard library only: their options need them.)
WHEN_RUN = (
    "temporalio",
    "kubernetes",
    "fleetwright.workflows.payloads",
    "fleetwright.kube",
    "fleetwright.local",
    "fleetwright.local",
    "fleetwright.chaos.system",
    "fleetwright.chaos.runner",
)


def test_the_entry_point_and_every_command_module_import_no_client() -> None:
    code = "import fleetwright.cli.main\nfrom fleetwright.cli.commands import load_all\nload_all()"
    assert imported(code, WHEN_RUN + WORKER_ONLY) == []


# What only printing needs, never listing or parsing the commands: rich (its tables and trees, and
# what typer's rich help pulls in: markdown, syntax highlighting).
RICH = ("rich", "typer.rich_utils", "markdown_it", "pygments")


def help_of(argv: list[str]) -> str:
    """``fleetwright *argv --help`` as the entry point runs it, its help sent to stderr."""
    return (
        "import sys\n"
        f"sys.argv = ['fleetwright', *{argv!r}, '--help']\n"
        "from fleetwright.cli.app import app\n"
        "from fleetwright.cli.commands import load\n"
        "load(sys.argv[1:])\n"
        "sys.stdout = sys.stderr\n"
        "try:\n"
        "    app()\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stdout = sys.__stdout__\n"
    )


def test_the_root_help_lists_every_command_without_rich_or_pydantic() -> None:
    """The answers' models live apart (``fleetwright.cli.reports``); a command's own help imports
    pydantic anyway, through typer parsing the root options."""
    assert imported(help_of([]), (*RICH, "pydantic", *WHEN_RUN, *WORKER_ONLY)) == []


@pytest.mark.parametrize("command", [["status"], ["node", "reset"], ["history"]])
def test_a_command_help_imports_neither_rich_nor_a_client(command: list[str]) -> None:
    assert imported(help_of(command), (*RICH, *WHEN_RUN, *WORKER_ONLY)) == []


def test_the_plain_help_lists_each_command_with_its_whole_first_sentence() -> None:
    load_all()
    commands = " ".join(CliRunner().invoke(app, ["--help"]).output.partition("Commands:")[2].split())
    assert "abort Abort the rollout: nothing new starts" in commands
    assert "asks first unless --yes." in commands  # not cut at the terminal's width
    assert "..." not in commands


def lab_importers() -> set[str]:
    """The command modules whose source imports a lab module (``fleetwright.lab.MODULES``)."""
    found = set()
    for path in sorted((REPO / "fleetwright" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name == m or name.startswith(f"{m}.") for name in names for m in lab.MODULES):
                found.add(path.stem)
    return found


def test_the_lab_commands_are_the_command_modules_that_import_the_lab() -> None:
    assert lab_importers() == LAB_COMMAND_MODULES


def test_without_the_lab_the_root_help_lists_the_runtime_commands_only() -> None:
    """As in the controller image: the lab commands' modules would fail to import there."""
    code = "import fleetwright.lab\nfleetwright.lab.installed = lambda: False\n" + help_of([])
    lab_commands = tuple(f"fleetwright.cli.{name}" for name in LAB_COMMAND_MODULES)
    assert imported(code, lab_commands + lab.MODULES) == []


@pytest.mark.parametrize("command", sorted(c for c, m in COMMANDS.items() if m in LAB_COMMAND_MODULES))
def test_a_lab_command_without_the_lab_exits_2_with_one_line(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lab, "installed", lambda: False)
    with pytest.raises(SystemExit) as exited:
        load(["--kubeconfig", "k", command, "up"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error == not_shipped(command) + "\n"
    assert f"`fleetwright {command}` is a development command, not shipped" in error


def test_with_the_lab_installed_every_command_module_loads() -> None:
    assert lab.installed()
    assert {m.__name__.removeprefix("fleetwright.cli.") for m in load_all()} == set(COMMANDS.values())
