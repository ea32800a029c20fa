"""``fleetwright demo`` from the command line: a whole rollout of the repository's examples on a
small local fleet, then a clean shutdown with no process left behind; ``--fail-canary`` shows a
halted rollout; ``--bad-gpu`` a health-gated one (the stack's Prometheus scraping its GPU
exporter) where the node given an XID at its gate fails naming the check and the rollout halts
before any later node starts; ``--campaign`` the example Campaign over three local clusters,
through its approval. Its output goes to a pipe, as in CI or a log: the final table and the
hints keep one line each (nothing wrapped, nothing run together)."""

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


def test_the_demo_with_a_bad_gpu_fails_that_node_at_its_gate_and_halts() -> None:
    output = run_demo("--bad-gpu")
    found = re.search(r"^XID 79 set on (\S+)'s GPU \d at \d+s, at its health gate$", output, re.MULTILINE)
    assert found is not None, output
    bad = found.group(1)
    assert any(line.startswith("rollout Halted: ") for line in lines(output)), output
    # The live table's last view: the node Failed at its gate, naming the check and its values.
    check = r"gpu-xid-errors Failed \(\d/5, last Failed \[1, .*"  # the broken GPU's series first
    failed = rf"│ +│ {bad} +│ HealthGateFailed +│ health gate failed: .*{check}"
    halted = r"│ Halted +│ .* +│ \d/4 +│ \d +│ 1 +│ 0 +│"
    assert any(re.fullmatch(failed, line) for line in lines(output)), output
    assert any(re.fullmatch(halted, line) for line in lines(output)), output
    assert re.search(
        rf"^  Degraded: RolloutHalted — .*first: {bad} \(health gate failed", output, re.MULTILINE
    )
    # The nodes as the cluster had them at the end: with 4 nodes maxUnavailable 25% is one, so the
    # canary passed its gate, the next node failed it, and no node started after it.
    groups = {m[1]: m[2].split(", ") for m in re.finditer(r"^    (.+): (\S.*)$", output, re.MULTILINE)}
    assert groups.keys() == {"HealthGatePassed", "HealthGateFailed", "not started"}, groups
    assert groups["HealthGateFailed"] == [bad]
    assert len(groups["HealthGatePassed"]) == 1
    assert len(groups["not started"]) == 2
    assert len({bad, *groups["HealthGatePassed"], *groups["not started"]}) == 4
    assert "  fleetwright status gpu-tuning-gated" in lines(output)
    assert f"  fleetwright logs gpu-tuning-gated {bad}" in lines(output)
    assert f"workflow node/gpu-tuning-gated/{bad}" in output
    assert_nothing_left(output)


def test_the_demo_of_a_campaign_rolls_out_three_clusters_after_the_approval() -> None:
    output = run_demo("--campaign", "--nodes", "2")
    assert "campaign Complete" in lines(output)
    assert re.search(r"^  Ready: Complete — ", output, re.MULTILINE), output
    # The final table: every cluster Complete with its two nodes, the approval it gave.
    for cluster in ("cluster-1", "cluster-2", "cluster-3"):
        assert any(
            re.fullmatch(rf"│ {cluster} +│ Complete +│ 2/2 +│ 0 +│.*│", line) for line in lines(output)
        ), output
    assert "approved after stage canary" in output
    # The canary stage's fleet gate: two measurements of cluster-1's changed nodes on the stack's
    # real Prometheus, before the approval.
    gate = re.findall(r"^  fleet gate: cluster-1 gpu-xid-errors Successful \[0\.0\]$", output, re.MULTILINE)
    assert len(gate) == 2, output
    assert "  fleetwright campaign status gpu-tuning" in lines(output)
    assert_nothing_left(output)
