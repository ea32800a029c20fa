"""Replays a recorded workflow history against the current workflow code, and explains a failure:
``.venv/bin/python -m tests.workflow.replay tests/workflow/histories/0.1.0/rollout-soaking.json``
prints the history's events (what the release commanded) and the first place the current code
commands something else. The replay test (``test_replay.py``) runs the same replay on every
supported release's frozen histories."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from fleetwright.process.shutdown import run_and_exit
from fleetwright.worker.temporalworker import WORKFLOWS
from tests.support.releases import REPO

EXPLAIN = ".venv/bin/python -m tests.workflow.replay"


def workflow_type(path: Path) -> str:
    """The workflow type the history's first event started."""
    events = json.loads(path.read_text())["events"]
    attributes = events[0]["workflowExecutionStartedEventAttributes"]
    return str(attributes["workflowType"]["name"])


async def replay(path: Path, workflows: tuple[type, ...] | None = None) -> str | None:
    """None when the current code (or ``workflows``) replays the history; else what broke, naming
    the workflow, the history and the command that explains it."""
    replayer = Replayer(workflows=list(workflows or WORKFLOWS), data_converter=pydantic_data_converter)
    history = WorkflowHistory.from_json(path.stem, await asyncio.to_thread(path.read_text))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is None:
        return None
    release = path.parent.name
    return (
        f"workflow {workflow_type(path)} no longer replays {release}/{path.name}, recorded by "
        f"fleetwright {release}: a run of it in flight when a fleet upgrades from {release} would "
        f"fail its workflow tasks. {result.replay_failure}\n"
        f"Explain: {EXPLAIN} {path.relative_to(REPO) if path.is_relative_to(REPO) else path}\n"
        "Keep the old behaviour for old histories behind workflow.patched (docs/upgrading.md)."
    )


def describe(path: Path) -> list[str]:
    """One line per event: its id, type and the activity, timer, signal or marker it names."""
    lines = []
    for event in json.loads(path.read_text())["events"]:
        kind = str(event["eventType"]).removeprefix("EVENT_TYPE_")
        detail = ""
        for key, value in event.items():
            if key.endswith("Attributes") and isinstance(value, dict):
                name = value.get("activityType") or value.get("workflowType") or {}
                detail = (
                    name.get("name")
                    or value.get("signalName")
                    or value.get("markerName")
                    or value.get("timerId")
                    or ""
                )
        lines.append(f"{event['eventId']:>5} {kind} {detail}".rstrip())
    return lines


async def explain(path: Path) -> int:
    print(f"{path}: {workflow_type(path)}")
    print("\n".join(describe(path)))
    failure = await replay(path)
    print(f"\n{failure or 'replays with the current code'}")
    return 1 if failure else 0


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: {EXPLAIN} HISTORY.json")
    sys.exit(asyncio.run(explain(Path(sys.argv[1]).resolve())))


if __name__ == "__main__":
    run_and_exit(main)
