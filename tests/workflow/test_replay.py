"""Committed histories replay against the current workflow code: a change that would break
running rollouts (non-determinism) fails here, before it reaches a fleet."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from fleetwright.worker.temporal import WORKFLOWS

pytestmark = pytest.mark.workflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed() -> None:
    names = {path.stem for path in HISTORIES}
    assert {"rollout-canary-gate-approve-abort", "node-reboot-complete", "rollout-rollback-abort"} <= names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_history_replays_deterministically(path: Path) -> None:
    replayer = Replayer(workflows=list(WORKFLOWS), data_converter=pydantic_data_converter)
    workflow_id = "nodeprofile/replay" if path.stem.startswith("rollout") else "node/replay"
    history = WorkflowHistory.from_json(workflow_id, await asyncio.to_thread(path.read_text))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
