"""``fleetwright plan --kubeconfig``: the preview reads the live fleet from the real apiserver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from fleetwright.local import examples
from tests.support.engine import label_nodes, unique
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration

load_all()  # every command registered on the app


def test_plan_reads_the_live_fleet(cluster: ClusterUnderTest, tmp_path: Path) -> None:
    group = unique("plan")
    nodes = cluster.add_nodes(4)
    label_nodes(cluster, nodes, f"test.fleetwright.io/group={group}")
    profile = examples.profile(unique("live"), selector={"test.fleetwright.io/group": group})
    policy = examples.policy(max_unavailable=2)
    manifest = tmp_path / "rollout.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                profile.model_dump(mode="json", by_alias=True, exclude_none=True),
                policy.model_dump(mode="json", by_alias=True, exclude_none=True),
            ]
        )
    )
    result = CliRunner().invoke(
        app, ["plan", str(manifest), "--kubeconfig", str(cluster.kubeconfig), "-o", "json"]
    )
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert sorted(n["node"] for n in plan["nodes"]) == sorted(nodes)
    assert all(n["reboot"] for n in plan["nodes"])
