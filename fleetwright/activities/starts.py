"""Starting the node workflows a rollout decision names, and finding those that ended without
reporting, through the worker's Temporal client.

One activity per decision instead of a child workflow start per node: every child start cost the
rollout workflow two history events and a workflow task, and the server applies them one at a time
under the rollout's own lock, so a large decision took minutes to start. Started so, the node
workflows still report to the rollout by signal (``activities.report``), as they did as abandoned
children.

Idempotent: a run started since the decision (by this attempt's duplicate or an earlier attempt,
even one that has finished since) is left as it is. A run still open from before the decision is
an earlier pass's that has reported and is closing (the planner starts no node whose workflow it
still waits on), or a hardware-suspect node's that re-gates it in quarantine (``workflows.quarantine``),
which the start ends (``END_QUARANTINE_SIGNAL``): the start waits for it to close and then begins
the node's workflow afresh, since adopting it would leave the decision's work undone and take its
report for this one's. It must not
decide what starts; the planner did.

A node workflow terminated, timed out or cancelled (a human in the Temporal UI, a reset gone wrong)
never reports: without ``ended_nodes`` its rollout would wait for it forever and its start claim
would hold every other profile's budget. A completed one whose report was lost is read back. Found
by one visibility query per look-up (the store is eventually consistent: an end shows at a later
look-up at worst).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import (
    Client,
    Interceptor,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
)
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import (
    END_QUARANTINE_SIGNAL,
    NAMES,
    EndedNodes,
    EndedNodesRequest,
    NodeResult,
    StartNodesRequest,
    WorkflowStart,
)
from fleetwright.errors import RetryableError
from fleetwright.planner.rollout.observations import RunStatus

# Start requests in flight at once: enough to keep the server busy, few enough that one decision
# does not crowd out every other client call of the worker.
CONCURRENT_STARTS = 16
# How long a start waits for an earlier pass's run to close, and how often it looks: such a run has
# reported and only its completion is left. One still open after that is not closing: the attempt
# fails (retryable) and says which.
EARLIER_RUN_CLOSE_SECONDS = 60.0
EARLIER_RUN_POLL_SECONDS = 0.5


class NodeStarter:
    """The start activity, on the worker's client plus ``interceptors`` (the worker's tracing, so a
    node's spans hang under the start that began it)."""

    def __init__(self, interceptors: Sequence[Interceptor] = ()) -> None:
        self._interceptors = tuple(interceptors)
        self._client: Client | None = None

    @activity.defn(name=NAMES.START_NODES)
    @temporal_errors
    async def start_nodes(self, request: StartNodesRequest) -> int:
        """Start every node workflow of the decision; returns how many this attempt started."""
        client = self._on(activity.client())
        retried = activity.info().attempt > 1
        slots = asyncio.Semaphore(CONCURRENT_STARTS)

        async def start(one: WorkflowStart) -> bool:
            async with slots:
                if retried and await _started_since(client, one.id, request.decided_at):
                    return False
                try:
                    await _start(client, request, one)
                except WorkflowAlreadyStartedError:
                    if await _started_since(client, one.id, request.decided_at):
                        return True  # this decision's own run (a duplicate delivery)
                    await _ended_quarantine(client, one.id)
                    await _closed(client, one.id)
                    await _start(client, request, one)
                activity.heartbeat()
                return True

        return sum(await asyncio.gather(*map(start, request.starts)))

    @activity.defn(name=NAMES.ENDED_NODES)
    @temporal_errors
    async def ended_nodes(self, request: EndedNodesRequest) -> EndedNodes:
        """The waited-on node workflows that are no longer running: a completed one's own result, a
        failure naming how any other one ended. One visibility query for the profile's closed node
        workflows started since the earliest decision waited on (not one call per running node:
        at thousands of nodes that was thousands of calls per observe interval); a completed one's
        result is read back only for it. Nodes running for an earlier target (their start is not
        known here) are looked up by the absence of an open run (``_ended_earlier``)."""
        if not request.waiting and not request.earlier:
            return EndedNodes()
        client = self._on(activity.client())
        closed = await _closed_runs(client, request) if request.waiting else {}
        closed |= await _ended_earlier(client, request)
        finished, unfinished = [], []
        for node, execution in sorted(closed.items()):
            if execution.status is WorkflowExecutionStatus.COMPLETED:
                handle = client.get_workflow_handle(
                    execution.id, run_id=execution.run_id, result_type=NodeResult
                )
                finished.append(await handle.result(follow_runs=False))
            else:
                unfinished.append(_failed(node, request.target, execution))
            activity.heartbeat()
        return EndedNodes(finished=tuple(finished), unfinished=tuple(unfinished))

    def _on(self, worker_client: Client) -> Client:
        if not self._interceptors:
            return worker_client
        if self._client is None:
            config = worker_client.config()
            config["interceptors"] = [*config.get("interceptors", []), *self._interceptors]
            self._client = Client(**config)
        return self._client


async def _start(client: Client, request: StartNodesRequest, one: WorkflowStart) -> None:
    await client.start_workflow(
        request.workflow,
        one.input,
        id=one.id,
        task_queue=request.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        static_summary=one.summary or None,
        static_details=one.details or None,
        search_attributes=_search_attributes(one),
        # Where this worker also runs the workflows (one process, the chart's default), the first
        # workflow task comes back in the start's answer: no matching round trip for it.
        request_eager_start=True,
    )


def _search_attributes(one: WorkflowStart) -> TypedSearchAttributes:
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(SearchAttributeKey.for_keyword(name), value)
        if isinstance(value, str)
        else SearchAttributePair(SearchAttributeKey.for_keyword_list(name), value)
        for name, value in sorted(one.search_attributes.items())
    ]
    return TypedSearchAttributes(pairs)


async def _ended_quarantine(client: Client, workflow_id: str) -> None:
    """Tell the open run of ``workflow_id`` to stop re-gating its node, if it does (a run that is
    merely closing ignores it; one that closed meanwhile cannot take it)."""
    try:
        await client.get_workflow_handle(workflow_id).signal(END_QUARANTINE_SIGNAL)
    except RPCError as error:
        if error.status is not RPCStatusCode.NOT_FOUND:
            raise


async def _closed(client: Client, workflow_id: str) -> None:
    """Wait for the open run of ``workflow_id`` to close (RetryableError if it does not)."""
    handle = client.get_workflow_handle(workflow_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EARLIER_RUN_CLOSE_SECONDS
    while (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
        if loop.time() >= deadline:
            raise RetryableError(
                f"node workflow {workflow_id} of an earlier pass is still running "
                f"{EARLIER_RUN_CLOSE_SECONDS:.0f} s after the decision to start it again",
                reason="EarlierRunOpen",
            )
        activity.heartbeat()
        await asyncio.sleep(EARLIER_RUN_POLL_SECONDS)


async def _described(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The id's latest run; None when the id has none."""
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            return None
        raise


async def _started_since(client: Client, workflow_id: str, since: datetime) -> bool:
    """The id's latest run began at or after ``since`` (so an earlier attempt started it)."""
    described = await _described(client, workflow_id)
    return described is not None and described.start_time >= since


async def _closed_runs(client: Client, request: EndedNodesRequest) -> dict[str, WorkflowExecution]:
    """node -> the closed run of its waited-on workflow (the latest, if several), among the runs
    that began at or after the rollout decided to start them (an earlier run is a previous one)."""
    since = min(request.waiting.values()).astimezone(UTC).isoformat()
    query = (
        f"WorkflowId STARTS_WITH '{request.id_prefix}' AND ExecutionStatus != 'Running' "
        f"AND StartTime >= '{since}'"
    )
    closed: dict[str, WorkflowExecution] = {}
    async for execution in client.list_workflows(query):
        node = execution.id.removeprefix(request.id_prefix)
        decided_at = request.waiting.get(node)
        # A node workflow never continues as new; such a run is no end.
        if decided_at is None or execution.status in (None, WorkflowExecutionStatus.CONTINUED_AS_NEW):
            continue
        seen = closed.get(node)
        if execution.start_time >= decided_at and (seen is None or execution.start_time > seen.start_time):
            closed[node] = execution
    return closed


async def _ended_earlier(client: Client, request: EndedNodesRequest) -> dict[str, WorkflowExecution]:
    """node -> the last run of each ``request.earlier`` node whose workflow has no open run. The
    open runs come from one visibility query; a node missing from it is described (the store may
    lag behind a start), and counts only if its latest run is closed."""
    if not request.earlier:
        return {}
    query = f"WorkflowId STARTS_WITH '{request.id_prefix}' AND ExecutionStatus = 'Running'"
    open_nodes = {e.id.removeprefix(request.id_prefix) async for e in client.list_workflows(query)}
    ended: dict[str, WorkflowExecution] = {}
    for node in sorted(set(request.earlier) - open_nodes):
        described = await _described(client, request.id_prefix + node)
        # None: no workflow at all, nothing of it to wait for or to show.
        if described is not None and described.status not in (None, WorkflowExecutionStatus.RUNNING):
            ended[node] = described
        activity.heartbeat()
    return ended


def _failed(node: str, target: str, execution: WorkflowExecution) -> NodeResult:
    assert execution.status is not None
    how = execution.status.name.lower().replace("_", " ")
    message = f"node workflow {execution.id} {how} before it finished (retry-node to run the node again)"
    return NodeResult(node=node, target=target, status=RunStatus.FAILED, message=message)
