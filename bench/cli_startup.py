"""How long the ``fleetwright`` CLI takes to answer: ``--help`` of every command (targets: under
0.3 s each), and ``status NAME`` of a running rollout against a local stack (target: under 0.8 s).

Each run is a fresh interpreter (``python -m fleetwright.cli.main ...``) after one uncounted run,
with the checkout's bytecode compiled first, as an installed package's is (with
``PYTHONDONTWRITEBYTECODE`` set, no run writes it and every run compiles fleetwright again: about
0.3 CPU s more for ``status NAME``). The medians of the wall time and of the CPU time (user +
system, which a loaded machine stretches far less) are printed, with the machine's load average:
on a shared machine the wall time moves with it.

``status NAME`` runs against the benchmarks' stack (``bench/harness.py``: control plane, Temporal
dev server, worker and controller) holding one rollout at an approval step over 8 simulated nodes,
so the command reads the NodeProfile, its policy, the nodes, the stage Jobs and the workflow's
published progress, and computes the ETA, as it does for a user. ``--help-only`` skips the stack;
``--baseline DIR`` also times another checkout's CLI (``git worktree add DIR main``) beside it.

    .venv/bin/python bench/cli_startup.py --runs 10
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from fleetwright.cli.commands import COMMANDS
from fleetwright.local import examples
from fleetwright.workflows.enginesettings import EngineSettings

if not __package__:  # run as a file (python bench/cli_startup.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import Stack, loadavg, manifest

HELP_TARGET = 0.3
STATUS_TARGET = 0.8
PROFILE = "bench-status"
NODES = 8
# The subcommands of the command groups, whose help is asked as often as the groups'.
SUBCOMMANDS = (("node", "reset"), ("package", "lint"), ("package", "test"), ("cluster", "up"))


def compile_bytecode(tree: str = "") -> None:
    """Write the bytecode of the checkout's ``fleetwright`` package (``tree``, else this one)."""
    root = Path(tree) if tree else Path(__file__).resolve().parents[1]
    if not compileall.compile_dir(root / "fleetwright", quiet=1):
        raise SystemExit(f"cannot compile {root / 'fleetwright'}")


def run_once(argv: Sequence[str], tree: str = "") -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``fleetwright *argv`` (of the checkout ``tree``
    when given, else the one this interpreter imports)."""
    env = {**os.environ, "PYTHONPATH": tree} if tree else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "fleetwright.cli.main", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=300,
        env=env,
        cwd=tree or None,  # ``python -m`` puts the working directory first on the path
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(argv: Sequence[str], runs: int, tree: str = "") -> tuple[float, float]:
    """(median wall, median CPU) over ``runs`` runs, after one uncounted run."""
    run_once(argv, tree)
    measured = [run_once(argv, tree) for _ in range(runs)]
    return statistics.median(w for w, _ in measured), statistics.median(c for _, c in measured)


def figures(argv: Sequence[str], runs: int, baseline: str) -> tuple[float, float, str]:
    """(median wall, median CPU, the baseline checkout's figures as text when one is given)."""
    wall, cpu = medians(argv, runs)
    if not baseline:
        return wall, cpu, ""
    base_wall, base_cpu = medians(argv, runs, baseline)
    return wall, cpu, f" (baseline {base_wall:.2f} s wall, {base_cpu:.2f} CPU s)"


def help_cases() -> list[list[str]]:
    commands = [[], *([name] for name in COMMANDS), *(list(pair) for pair in SUBCOMMANDS)]
    return [[*command, "--help"] for command in commands]


def measure_help(runs: int, baseline: str) -> list[str]:
    lines = []
    worst = (0.0, 0.0, "")
    for argv in help_cases():
        wall, cpu, before = figures(argv, runs, baseline)
        label = " ".join(argv)
        lines.append(f"  {label:28s} {wall:5.2f} s wall, {cpu:5.2f} CPU s{before}")
        worst = max(worst, (wall, cpu, label))
    lines.append(
        f"--help, slowest command: {worst[2]}: median {worst[0]:.2f} s wall, {worst[1]:.2f} CPU s "
        f"(target < {HELP_TARGET} s)"
    )
    return lines


def manifests() -> str:
    """A policy that waits for an approval first, and a profile on every node under it."""
    policy = examples.policy(PROFILE, steps=[{"name": "gate", "approval": {}}])
    profile = examples.profile(PROFILE, policy=PROFILE)
    return yaml.safe_dump_all([manifest(policy, PROFILE), manifest(profile, PROFILE)])


def wait_for_progress(target: list[str], within: float = 180) -> None:
    """Until ``status NAME`` shows the rollout's published progress (its current step)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        shown = subprocess.run(
            [sys.executable, "-m", "fleetwright.cli.main", *target, "status", PROFILE, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if shown.returncode == 0 and json.loads(shown.stdout).get("step"):
            return
        time.sleep(1.0)
    raise SystemExit(f"the rollout of {PROFILE} published no progress within {within:.0f}s")


def measure_status(runs: int, workdir: str, baseline: str) -> list[str]:
    rundir = Path(workdir or tempfile.mkdtemp(prefix="fleetwright-bench-cli-"))
    with Stack(NODES, EngineSettings(), rundir) as stack:
        stack.cluster.kubectl("apply", "-f", "-", input=manifests())
        target = [
            "--kubeconfig",
            str(stack.cluster.kubeconfig),
            "--temporal-address",
            stack.temporal.address,
            "--temporal-namespace",
            stack.temporal.namespace,
        ]
        wait_for_progress(target)
        wall, cpu, before = figures([*target, "status", PROFILE], runs, baseline)
    return [
        f"status {PROFILE} ({NODES} nodes, rollout at an approval step): median {wall:.2f} s wall, "
        f"{cpu:.2f} CPU s{before} (target < {STATUS_TARGET} s)"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="counted runs of each command")
    parser.add_argument("--help-only", action="store_true", help="skip status NAME (and its stack)")
    parser.add_argument("--workdir", default="", help="the stack's directory (default: a new temp dir)")
    parser.add_argument(
        "--baseline",
        default="",
        metavar="DIR",
        help="also time the fleetwright of this checkout (e.g. a worktree of main; its bytecode is "
        "compiled too), same interpreter",
    )
    options = parser.parse_args()
    compile_bytecode()
    if options.baseline:
        compile_bytecode(options.baseline)
    load_before = loadavg()
    lines = measure_help(options.runs, options.baseline)
    if not options.help_only:
        lines += measure_status(options.runs, options.workdir, options.baseline)
    print("\n".join(lines))
    print(f"load average: {load_before} before, {loadavg()} after ({os.cpu_count()} cores)")
    flags = (" --help-only" if options.help_only else "") + (
        f" --baseline {options.baseline}" if options.baseline else ""
    )
    print(f"reproduce: .venv/bin/python bench/cli_startup.py --runs {options.runs}{flags}")


if __name__ == "__main__":
    main()
