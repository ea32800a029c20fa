"""The releases fleetwright still supports upgrading from: each one's commit in git history and
its frozen workflow histories. Cutting a release adds a line here (CONTRIBUTING.md, "Cutting a
release"); dropping support for one removes its line and its histories together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from fleetwright.images.offline import Built

REPO = Path(__file__).resolve().parents[2]
HISTORIES = REPO / "tests" / "workflow" / "histories"

SUPPORTED: dict[str, str] = {
    "0.1.0": "4e1b8fd1f1f537b58519afc49cbd610d5e2e0d11",
    "0.2.0": "914dc506d9443b3c1b7234d69e02b25e250055a0",
}
"""Each supported release and the commit it was cut from (its tag is ``v<release>``). 0.2.0's
first cut never reached main: its commit is the one that brought it there, which also carries the
changes listed under Unreleased at that commit (their workflow changes are patched, so the
histories frozen by the first cut replay with either)."""


def previous() -> str:
    """The newest supported release: the one an upgrade test starts from."""
    return max(SUPPORTED, key=lambda release: tuple(int(part) for part in release.split(".")))


def histories(release: str) -> list[Path]:
    return sorted((HISTORIES / release).glob("*.json"))


def checkout(release: str, into: Path) -> Path:
    """The release's source tree, from its commit in git history (not a copy in this tree), below
    ``into``; its ``fleetwright`` package imports with this checkout's pinned dependencies."""
    tree = into / f"fleetwright-{release}"
    if (tree / "pyproject.toml").exists():
        return tree
    tree.mkdir(parents=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", SUPPORTED[release]],
            stdout=archive,
            check=True,
        )
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(tree, filter="tar")
    return tree


def release_path(tree: Path) -> dict[str, str]:
    """The variables that make Python run a release's code from its tree: its tree first on the
    path, and not the working directory (``-m`` would put a checkout there first; PYTHONSAFEPATH
    keeps it off)."""
    return {"PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}


def read_with_release(
    tree: Path, histories: Sequence[Path], queries: Sequence[Mapping[str, str]]
) -> tuple[list[str], dict[str, int]]:
    """What the release whose source tree is ``tree`` refuses of the payloads in ``histories`` and
    ``queries``, read with its own models (``releasereader``), and how many of each kind it read."""
    request = json.dumps({"histories": list(map(str, histories)), "queries": list(map(dict, queries))})
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("releasereader.py"))],
        input=request,
        env={**os.environ, **release_path(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    return list(answer["problems"]), dict(answer["read"])


def build_image(tree: Path, ref: str) -> Built:
    """The release's image ``ref``, built by the release's own offline builder from its tree
    (cached by content like every image)."""
    argv = [
        sys.executable,
        "-m",
        "fleetwright.images",
        "--repo",
        str(tree),
        "build",
        "--packages",
        "none",
        "--json",
    ]
    done = subprocess.run(
        argv, env={**os.environ, **release_path(tree)}, cwd=tree, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = [b for b in json.loads(done.stdout) if b["ref"] == ref]
    return Built(**{**built, "archive": Path(built["archive"])})


async def history_problems(client: Client, workflow_ids: Iterable[str]) -> list[str]:
    """What an upgrade must not leave in these workflows' Temporal histories: a failed workflow
    task (code that no longer replays them), a run that failed, timed out or was replaced, a
    workflow that is missing."""
    problems = []
    for workflow_id in workflow_ids:
        runs = [run async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
        if len(runs) != 1:
            problems.append(f"{workflow_id}: {len(runs)} runs")
        for run in runs:
            if run.status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.COMPLETED):
                problems.append(f"{workflow_id}: {run.status}")
            handle = client.get_workflow_handle(workflow_id, run_id=run.run_id)
            async for event in handle.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    cause = event.workflow_task_failed_event_attributes.failure.message
                    problems.append(f"{workflow_id} event {event.event_id}: {cause}")
    return problems
