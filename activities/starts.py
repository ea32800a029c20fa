"""Starting the node workflows a rollout decision names, through the worker's Temporal client.

One activity per decision instead of a child workflow start per node: every child start cost the
rollout workflow two history events and a workflow task, and the server applies them one at a time
under the rollout's own lock (about 3 starts per second on the dev server during a 10,000-node
rollout, so a 200-node decision took over a minute to start). Started so, the node workflows still
report to the rollout by signal, as they did as abandoned children.

Idempotent: a workflow already running under an id is left as it is (``USE_EXISTING``), and a
retried attempt also leaves alone a run started since the decision (an earlier attempt's, even one
that has finished since). It must not decide what starts; the planner did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from temporalio import activity
from temporalio.client import Client, Interceptor
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import NAMES, StartNodesRequest, WorkflowStart

# Start requests in flight at once: enough to keep the server busy, few enough that one decision
# does not crowd out every other client call of the worker.
CONCURRENT_STARTS = 16


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
                await client.start_workflow(
                    request.workflow,
                    one.input,
                    id=one.id,
                    task_queue=request.task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    static_summary=one.summary or None,
                    static_details=one.details or None,
                )
                activity.heartbeat()
                return True

        return sum(await asyncio.gather(*map(start, request.starts)))

    def _on(self, worker_client: Client) -> Client:
        if not self._interceptors:
            return worker_client
        if self._client is None:
            config = worker_client.config()
            config["interceptors"] = [*config.get("interceptors", []), *self._interceptors]
            self._client = Client(**config)
        return self._client


async def _started_since(client: Client, workflow_id: str, since: datetime) -> bool:
    """The id's latest run began at or after ``since`` (so an earlier attempt started it)."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status is RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.start_time >= since
