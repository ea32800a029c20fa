"""The Temporal side of the fleetwright process: the client (pydantic payloads) and the worker
that hosts the rollout and node workflows and the Kubernetes activities, with the interceptors
that give every activity its log context, metrics and spans."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import TLSConfig
from temporalio.worker import Interceptor, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from fleetwright.worker import tracing
from fleetwright.worker.observe import ActivityObserver
from fleetwright.worker.settings import WorkerSettings
from fleetwright.workflows.node import NodeWorkflow
from fleetwright.workflows.rollout import RolloutWorkflow

TASK_QUEUE = "fleetwright"
WORKFLOWS: tuple[type, ...] = (RolloutWorkflow, NodeWorkflow)
# Modules the workflow sandbox shares instead of importing again for every workflow it creates
# (a node workflow per node): pydantic and fleetwright's payload models and pure core, and the
# workflows' own payload models, retry policies and search attribute keys. They hold no mutable
# module state, and the pure core takes ``now`` as data (import-linter keeps its I/O out).
# Re-importing them is the largest part of starting a workflow in the worker's profile; only the
# workflow modules themselves (``workflows.node``, ``workflows.rollout``) are imported afresh.
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


async def connect(
    address: str, namespace: str = "default", *, tls: TLSConfig | None = None, api_key: str | None = None
) -> Client:
    return await Client.connect(
        address,
        namespace=namespace,
        data_converter=pydantic_data_converter,
        tls=tls or False,
        api_key=api_key,
    )


async def connect_with(settings: WorkerSettings) -> Client:
    """The processes' client: the address and namespace, plus mutual TLS and an API key when the
    settings name them (files mounted from Secrets, so no secret is in the settings themselves)."""
    return await connect(
        settings.temporal_address,
        settings.temporal_namespace,
        tls=_tls(settings),
        api_key=_read(settings.temporal_api_key_file, "temporal_api_key_file").decode().strip()
        if settings.temporal_api_key_file
        else None,
    )


def _tls(settings: WorkerSettings) -> TLSConfig | None:
    if settings.temporal_tls_dir is None:
        return None
    folder = settings.temporal_tls_dir
    ca = folder / "ca.crt"
    return TLSConfig(
        client_cert=_read(folder / "tls.crt", "temporal_tls_dir"),
        client_private_key=_read(folder / "tls.key", "temporal_tls_dir"),
        server_root_ca_cert=ca.read_bytes() if ca.exists() else None,
        domain=settings.temporal_tls_server_name or None,
    )


def _read(path: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ValueError(f"{field}: cannot read {path}: {error.strerror}") from error


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
