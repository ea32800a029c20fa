"""The Temporal worker of the fleetwright process: it hosts the rollout and node workflows and the
Kubernetes activities, with the interceptors that give every activity its log context, metrics and
spans. The client is ``fleetwright.process.temporalclient``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from fleetwright.worker import tracing
from fleetwright.worker.interceptor import ActivityInterceptor
from fleetwright.workflows.campaign import CampaignWorkflow
from fleetwright.workflows.node import NodeWorkflow
from fleetwright.workflows.rollout import RolloutWorkflow

TASK_QUEUE = "fleetwright"
WORKFLOWS: tuple[type, ...] = (RolloutWorkflow, NodeWorkflow, CampaignWorkflow)
# Modules the workflow sandbox shares instead of importing again for every workflow it creates
# (a node workflow per node): pydantic and fleetwright's payload models and pure core, and the
# workflows' own payload models, retry policies and search attribute keys. They hold no mutable
# module state, and the pure core takes ``now`` as data (import-linter keeps its I/O out).
# Re-importing them is the largest part of starting a workflow in the worker's profile; only the
# workflow modules themselves (``workflows.node``, ``workflows.rollout`` and the rollout's parts,
# ``workflows.turn`` and its siblings) are imported afresh, so the sandbox checks their code.
PASSTHROUGH_MODULES = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "fleetwright.api",
    "fleetwright.planner",
    "fleetwright.errors",
    "fleetwright.activities.payloads",
    "fleetwright.workflows.payloads",
    "fleetwright.workflows.retry",
    "fleetwright.workflows.search",
)


def interceptors() -> list[Interceptor]:
    """Log context and metrics for every activity; spans for workflows and activities."""
    return [ActivityInterceptor(), *tracing.interceptors()]


def build_worker(
    client: Client,
    activities: Sequence[Callable[..., Any]],
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 200,
    worker_interceptors: Sequence[Interceptor] | None = None,
    workflows: bool = True,
) -> Worker:
    """A worker for the given activities and, unless ``workflows`` is false, every fleetwright
    workflow. Activities are synchronous Kubernetes calls, so they run on a thread pool sized to
    the concurrency."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS) if workflows else [],
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
        ),
        activities=list(activities),
        activity_executor=ThreadPoolExecutor(max_workers=max_concurrent_activities) if activities else None,
        max_concurrent_activities=max_concurrent_activities,
        interceptors=list(interceptors() if worker_interceptors is None else worker_interceptors),
    )
