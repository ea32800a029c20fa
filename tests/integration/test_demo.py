"""``fleetwright demo`` from the command line: a whole rollout of the repository's examples on a
small local fleet, then a clean shutdown with no process left behind; ``--fail-canary`` shows a
halted rollout. Its output goes to a pipe, as in CI or a log: the final table and the hints keep
one line each (nothing wrapped, nothing run together)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def run_demo(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "fleetwright.cli.main", "demo", "--nodes", "4", "--timeout", "240", *args],
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def assert_nothing_left(output: str) -> None:
    workdir = re.search(r"export KUBECONFIG=(\S+)/kubeconfig", output)
    assert workdir is not None, output
    leftovers = subprocess.run(["pgrep", "-f", workdir.group(1)], capture_output=True, text=True, check=False)
    assert leftovers.stdout.strip() == "", f"processes left: {leftovers.stdout}"


def lines(output: str) -> list[str]:
    return [line.rstrip() for line in output.splitlines()]


def test_the_demo_rolls_out_the_example_profile_and_cleans_up() -> None:
    output = run_demo()
    assert "rollout Complete: 4/4 nodes complete" in lines(output)
    assert "Ready: RolloutComplete" in output
    assert re.search(r"Web UI: http://127\.0\.0\.1:\d+", output)
    # The final table's row is one line, and the table ends its line.
    assert any(re.fullmatch(r"│ Complete +│ done +│ 4/4 +│ 0 +│ 0 +│ 0 +│", line) for line in lines(output))
    assert any(re.fullmatch(r"└[─┴]+┘", line) for line in lines(output)), output
    # Every hint is a whole command on its line.
    assert "  kubectl get nodes -L fleetwright.io/status.gpu-tuning" in lines(output)
    assert "  kubectl describe nodeprofile gpu-tuning" in lines(output)
    assert "stopped: no process left behind" in output
    assert_nothing_left(output)


def test_the_demo_with_a_failing_canary_halts() -> None:
    output = run_demo("--fail-canary")
    assert "rollout Halted: 0/4 nodes complete" in lines(output)
    assert "StageFailed" in output
    assert_nothing_left(output)
