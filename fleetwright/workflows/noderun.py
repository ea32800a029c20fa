"""What one run of the node workflow keeps in memory (``NodeRun``): its input, the package state it
records (the ``PackageLedger``), the cordon it holds, its node gate, the stage it is at and the
humans' abort; and the plumbing every part of it calls activities through (bounded Kubernetes
calls, heartbeating waits, the node's status). The workflow's parts (``nodecordon``,
``nodestages``, ``nodestatus``) read and change it; none of them keeps state of its own.
Orchestration only: every side effect is an activity.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

from fleetwright.workflows.nodeerrors import activity_failure

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        CordonReport,
        NodeStatusRequest,
        NodeTarget,
        RecordStateRequest,
        StatusNote,
    )
    from fleetwright.planner.node.ledger import PackageLedger
    from fleetwright.workflows import retry
    from fleetwright.workflows import search as sa
    from fleetwright.workflows.payloads import NodeInput

if TYPE_CHECKING:
    from fleetwright.workflows.nodegate import GateRun

A = TypeVar("A")
R = TypeVar("R")
Activity = Callable[[NodeActivities, A], Awaitable[R]]


class NodeRun:
    """The memory of one node workflow's run. Built before any handler runs (a signal may come
    with the start); ``begin`` gives it the input."""

    def __init__(self) -> None:
        self.abort = False
        self.stage = "starting"
        self.cordon: CordonReport | None = None
        self.gate: GateRun | None = None
        self.quarantine_ended = False

    def begin(self, node_input: NodeInput) -> None:
        self.node_input = node_input
        self.target = NodeTarget(profile=node_input.profile, node=node_input.node)
        rollout = (node_input.target, node_input.since) if node_input.since is not None else None
        self.ledger = PackageLedger(
            node_input.profile, node_input.records, node_input.work, node_input.desired, rollout
        )
        self.packages = {p.name: p for p in node_input.packages}

    def gated(self) -> bool:
        """The policy has a node gate (no 0.1.0 input has one)."""
        node_input = self.node_input
        return bool(node_input.gate or node_input.external or node_input.validations)

    def needs_drain(self) -> bool:
        """Cordon and drain before the stages: an interrupt disrupts workloads, or a validation
        needs the node (its GPUs) to itself."""
        return self.node_input.work.needs_drain or bool(self.node_input.validations)

    def ours(self) -> bool:
        """The node is cordoned through our cordon (we lift it at the end)."""
        return self.cordon is not None and self.cordon.ours

    def at(self, stage: str) -> None:
        self.stage = stage

    async def call(self, activity: Activity[A, R], arg: A) -> R:
        """A Kubernetes call: bounded, retried on the API's transient errors."""
        try:
            return await workflow.execute_activity_method(
                activity,
                arg,
                start_to_close_timeout=retry.API_CALL_TIMEOUT,
                retry_policy=retry.API_CALL,
                summary=self.summary_of(activity),
            )
        except ActivityError as error:
            raise activity_failure(error) from error

    async def wait(self, activity: Activity[A, R], arg: A, bound_seconds: int) -> R:
        """A wait for a state (a drain, a stage's Job): heartbeating, bounded by ``bound_seconds``."""
        try:
            return await workflow.execute_activity_method(
                activity,
                arg,
                start_to_close_timeout=timedelta(seconds=bound_seconds + 120),
                heartbeat_timeout=retry.heartbeat(self.node_input.settings),
                retry_policy=retry.LONG_WAIT,
                summary=self.summary_of(activity),
            )
        except ActivityError as error:
            raise activity_failure(error) from error

    def summary_of(self, activity: Activity[A, R]) -> str:
        return f"{activity.__name__.replace('_', '-')} {self.node_input.node}: {self.stage}"

    async def record(self) -> None:
        state = self.ledger.state()
        node_input = self.node_input
        request = RecordStateRequest(profile=node_input.profile, node=node_input.node, state=state)
        await self.call(NodeActivities.record_state, request)

    async def status(self, note: StatusNote) -> None:
        node_input = self.node_input
        request = NodeStatusRequest(profile=node_input.profile, node=node_input.node, **note.model_dump())
        await self.call(NodeActivities.set_node_status, request)
        self.phase(note.phase.value)

    def phase(self, phase: str) -> None:
        """The phase a status activity showed, for the Temporal UI's search."""
        if self.node_input.settings.search_attributes:
            sa.upsert([sa.PHASE.value_set(phase)], self.node_input.unregistered_search_attributes)
