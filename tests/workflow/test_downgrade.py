"""A downgrade to the previous release strands no rollout that uses no newer feature: every
payload the current code writes for one (workflow inputs and results, continue-as-new inputs,
activity inputs and results, signals, updates, memos, query results) is read by the previous
release's own models, loaded from its source tree in git history (docs/upgrading.md,
"Downgrading"). The rollouts are the shapes that release had: the scenarios its frozen histories
were recorded with (``record_histories``: canary, approval, soak, batches, a reboot, a failed node
retried and skipped, rollback, abort, continue-as-new, deletion), here run on the current code."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RawValue

from fleetwright.worker.temporalworker import WORKFLOWS
from tests.support.releases import checkout, previous, read_with_release
from tests.support.waiting import until
from tests.workflow.record_histories import SCENARIOS, Recorder

pytestmark = pytest.mark.workflow

QUERIES = {
    defn.name: tuple(name for name, query in defn.queries.items() if name and not query.arg_types)
    for defn in map(workflow._Definition.must_from_class, WORKFLOWS)
}
"""Each workflow type's queries that take no argument: asked wherever a scenario would save one."""
# Every kind of payload the scenarios write, so the test cannot pass by reading none of a kind.
KINDS = {
    "workflow input",
    "workflow result",
    "continue-as-new",
    "activity input",
    "activity result",
    "signal input",
    "update input",
    "update result",
    "memo",
    "query result",
}


class Capture(Recorder):
    """Runs the scenarios; where one would save a workflow's history, asks its queries instead (a
    query's result is in no history). The histories are fetched once every scenario ran."""

    def __init__(self, client: Client, folder: Path) -> None:
        super().__init__(client, folder)
        self.queries: list[dict[str, str]] = []
        self.saved: set[str] = set()

    async def save(self, handle: WorkflowHandle[Any, Any], name: str) -> None:
        workflow_type = (await handle.describe()).workflow_type
        self.saved.add(handle.id)
        for query in QUERIES[workflow_type]:
            raw = await handle.query(query, result_type=RawValue)
            payload = base64.b64encode(raw.payload.SerializeToString()).decode()
            self.queries.append(
                {"workflow": workflow_type, "query": query, "id": handle.id, "payload": payload}
            )

    async def histories(self) -> list[Path]:
        """Every run of every workflow the scenarios started, each history in a file."""
        runs = await until(self._runs, 30.0, f"the scenarios' workflows {sorted(self.saved)} in visibility")
        paths = []
        for index, (workflow_id, run_id) in enumerate(sorted(runs)):
            history = await self.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
            path = self.folder / f"{index:03d}-{workflow_id.replace('/', '_')}.json"
            path.write_text(history.to_json())
            paths.append(path)
        return paths

    async def _runs(self) -> set[tuple[str, str]] | None:
        query = " OR ".join(f"TaskQueue = '{queue}'" for queue in self.queues)
        runs = {(run.id, run.run_id) async for run in self.client.list_workflows(query)}
        return runs if self.saved <= {workflow_id for workflow_id, _ in runs} else None


async def test_the_previous_release_reads_every_payload_of_a_rollout_using_no_newer_feature(
    client: Client, tmp_path: Path
) -> None:
    capture = Capture(client, tmp_path)
    for scenario in SCENARIOS:
        await scenario(capture)
    histories = await capture.histories()
    release = previous()
    problems, read = read_with_release(checkout(release, tmp_path), histories, capture.queries)
    assert not problems, (
        f"fleetwright {release} refuses {len(problems)} payload(s) the current code wrote for rollouts "
        f"that use no newer feature (list a new field in api.compat.added_fields and write it only "
        "when its feature is used):\n" + "\n".join(problems)
    )
    assert set(read) == KINDS, read
