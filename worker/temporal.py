"""The Temporal side of the fleetwright process: the client (pydantic payloads) and the worker
that hosts the rollout and node workflows and the Kubernetes activities, with the interceptors
that give every activity its log context, metrics and spans."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Interceptor, Worker

from fleetwright.worker import tracing
from fleetwright.worker.observe import ActivityObserver
from fleetwright.workflows.node import NodeWorkflow
from fleetwright.workflows.rollout import RolloutWorkflow

TASK_QUEUE = "fleetwright"
WORKFLOWS: tuple[type, ...] = (RolloutWorkflow, NodeWorkflow)


async def connect(address: str, namespace: str = "default") -> Client:
    return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)


def interceptors() -> list[Interceptor]:
    """Log context and metrics for every activity; spans for workflows and activities."""
    return [ActivityObserver(), *tracing.interceptors()]


def build_worker(
    client: Client,
    activities: Sequence[Callable[..., Any]],
    *,
    task_queue: str = TASK_QUEUE,
    max_concurrent_activities: int = 200,
    worker_interceptors: Sequence[Interceptor] | None = None,
) -> Worker:
    """A worker for every fleetwright workflow and the given activities. Activities are
    synchronous Kubernetes calls, so they run on a thread pool sized to the concurrency."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=list(activities),
        activity_executor=ThreadPoolExecutor(max_workers=max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
        interceptors=list(interceptors() if worker_interceptors is None else worker_interceptors),
    )
