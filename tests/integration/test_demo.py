"""``fleetwright demo`` from the command line: a whole rollout on a small local fleet, then a clean
shutdown with no process left behind; ``--fail-canary`` shows a halted rollout."""

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
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def assert_nothing_left(output: str) -> None:
    workdir = re.search(r"export KUBECONFIG=(\S+)/kubeconfig", output)
    assert workdir is not None, output
    leftovers = subprocess.run(["pgrep", "-f", workdir.group(1)], capture_output=True, text=True, check=False)
    assert leftovers.stdout.strip() == "", f"processes left: {leftovers.stdout}"


def test_the_demo_rolls_out_the_example_profile_and_cleans_up() -> None:
    output = run_demo()
    assert "rollout Complete: 4/4 nodes complete" in output
    assert "Ready: RolloutComplete" in output
    assert re.search(r"Web UI: http://127\.0\.0\.1:\d+", output)
    assert "stopped: no process left behind" in output
    assert_nothing_left(output)


def test_the_demo_with_a_failing_canary_halts() -> None:
    output = run_demo("--fail-canary")
    assert "rollout Failed: 0/4 nodes complete" in output
    assert "StageFailed" in output
    assert_nothing_left(output)
