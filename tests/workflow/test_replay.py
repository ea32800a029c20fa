"""Every supported release's frozen histories replay against the current workflow code: a change
that would break the rollouts and node workflows in flight when a fleet upgrades fails here, naming
the workflow, the history and the command that explains it (docs/upgrading.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.workflows.node import NodeWorkflow
from fleetwright.workflows.rollout import ROLLOUT_WORKFLOW
from tests.support.releases import HISTORIES, SUPPORTED, histories
from tests.workflow.incompatible import IncompatibleRollout
from tests.workflow.replay import replay, workflow_type

pytestmark = pytest.mark.workflow

FROZEN = [path for release in SUPPORTED for path in histories(release)]
# What every release freezes: the paths an upgrade can find a workflow in (record_histories.py).
EXPECTED = {
    "rollout-waiting-at-gate",
    "rollout-soaking",
    "rollout-node-mid-stage",
    "node-mid-stage-reboot",
    "rollout-halted",
    "rollout-rolled-back",
    "rollout-continued-first-run",
    "rollout-continued-latest-run",
    "rollout-deleted",
    "node-aborted",
    "node-stage-failed",
}


def test_every_supported_release_has_its_histories_and_no_other_is_kept() -> None:
    for release in SUPPORTED:
        assert {path.stem for path in histories(release)} >= EXPECTED, release
    kept = {folder.name for folder in HISTORIES.iterdir() if folder.is_dir()}
    assert kept == set(SUPPORTED), "a release's histories leave with its support (tests/support/releases.py)"


@pytest.mark.parametrize("path", FROZEN, ids=[f"{p.parent.name}/{p.stem}" for p in FROZEN])
async def test_a_frozen_history_replays_on_the_current_code(path: Path) -> None:
    failure = await replay(path)
    assert failure is None, failure


async def test_an_incompatible_change_fails_naming_the_workflow_and_the_explaining_command() -> None:
    release = max(SUPPORTED)
    path = HISTORIES / release / "rollout-waiting-at-gate.json"
    assert workflow_type(path) == ROLLOUT_WORKFLOW
    failure = await replay(path, workflows=(IncompatibleRollout, NodeWorkflow))
    assert failure is not None
    assert f"workflow {ROLLOUT_WORKFLOW} no longer replays {release}/rollout-waiting-at-gate.json" in failure
    assert "Explain: .venv/bin/python -m tests.workflow.replay tests/workflow/histories/" in failure
    assert "Nondeterminism" in failure or "nondeterminism" in failure.lower()
