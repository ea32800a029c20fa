"""What the previous release wrote is read by the current code with nothing dropped or misread:
its NodeProfiles and DeploymentPolicies (its admission corpus and examples, as it stores them),
the package state it records on nodes, and the keys and labels it writes. The previous release's
own code, from its commit in git history, writes them (``tests/support/release_writer.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.planner.node.state import format_annotation, parse_annotation
from tests.support import release_writer
from tests.support.releases import REPO, checkout, previous, release_path

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tree = checkout(previous(), tmp_path_factory.mktemp("release"))
    env = {**os.environ, **release_path(tree)}
    writer = REPO / "tests" / "support" / "release_writer.py"
    out = subprocess.run(
        [sys.executable, str(writer), str(tree)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_the_writer_ran_the_previous_releases_code(written: dict[str, Any]) -> None:
    assert len(written["objects"]) >= 8
    assert {o["kind"] for o in written["objects"]} == {"NodeProfile", "DeploymentPolicy"}


def test_its_api_objects_read_back_unchanged(written: dict[str, Any]) -> None:
    models: dict[str, type[NodeProfile] | type[DeploymentPolicy]] = {
        "NodeProfile": NodeProfile,
        "DeploymentPolicy": DeploymentPolicy,
    }
    for stored in written["objects"]:
        read = models[stored["kind"]].model_validate(stored)
        name = f"{stored['kind']} {stored['metadata']['name']}"
        assert read.model_dump(mode="json", by_alias=True, exclude_none=True) == stored, name


def test_its_node_records_read_back_unchanged(written: dict[str, Any]) -> None:
    for key, value in written["records"].items():
        state = parse_annotation(key, value)
        assert state.packages["tuning"].pending is not None
        assert format_annotation(state) == (key, value)


def test_every_key_and_label_it_writes_is_still_the_same(written: dict[str, Any]) -> None:
    current = release_writer.names()
    changed = {
        name: (old, current.get(name)) for name, old in written["names"].items() if current.get(name) != old
    }
    assert not changed, f"keys the previous release writes that this code reads differently: {changed}"


def test_the_writer_is_not_this_checkouts_code(written: dict[str, Any], tmp_path: Path) -> None:
    """The comparison means something only if the other side ran from the release's tree."""
    tree = checkout(previous(), tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", "import fleetwright; print(fleetwright.__file__)"],
        env={**os.environ, **release_path(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(probe.stdout.strip()).is_relative_to(tree)
