"""Runs the fleetwright worker: the rollout and node workflows and every Kubernetes activity,
until told to stop; and the process-level observability every fleetwright process sets up
(logs, the Prometheus endpoint, traces) before it connects to Temporal."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fleetwright.activities.health import health_activities
from fleetwright.activities.node import DEFAULT_THREADS, all_activities
from fleetwright.activities.rollout import rollout_activities
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.kube.jobwatch import JobWatches
from fleetwright.process import logs, metrics
from fleetwright.process.searchattrs import SearchAttributeCheck
from fleetwright.process.settings import WorkerSettings
from fleetwright.process.temporalclient import connect_with
from fleetwright.worker import tracing
from fleetwright.worker.members import Activities, MemberWorkers
from fleetwright.worker.temporalworker import build_worker

log = logging.getLogger("fleetwright.worker")


@contextlib.contextmanager
def observability(settings: WorkerSettings, process: str) -> Iterator[None]:
    """Logs, metrics and traces of one fleetwright process, for as long as it runs."""
    logs.configure(settings.log_format, settings.log_level)
    log.info(
        "%s starting (temporal %s, task queue %s)", process, settings.temporal_address, settings.task_queue
    )
    metrics.serve(settings.metrics_port, settings.metrics_host, process)
    provider = tracing.configure(settings, process)
    try:
        yield
    finally:
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched


def cache_bytecode() -> None:
    """Keep compiled bytecode even where the environment says not to write it.

    The workflow sandbox imports each workflow's module afresh for every workflow run it creates.
    With ``PYTHONDONTWRITEBYTECODE`` set (common in images and CI) there is no ``.pyc`` to load, so
    every node workflow would compile ``workflows/node.py`` and its imports from source. The
    bytecode goes to a private cache directory, not next to the sources, so a read-only install or
    a clean tree stays as it is."""
    if sys.dont_write_bytecode:
        sys.dont_write_bytecode = False
        sys.pycache_prefix = sys.pycache_prefix or str(
            Path(tempfile.gettempdir()) / f"fleetwright-pycache-{os.getuid()}"
        )


# What a worker of each ``worker_role`` polls for, as its start-up line says it.
ROLES = {"all": "workflows and activities", "workflows": "workflows", "activities": "activities"}


async def run_worker(settings: WorkerSettings, stop: asyncio.Event) -> None:
    """The worker until ``stop``: the workflows, the activities, or both, as
    ``settings.worker_role`` says; and as much for each campaign's member cluster
    (``worker.members``)."""
    cache_bytecode()
    client = await connect_with(settings)
    async with contextlib.AsyncExitStack() as resources:
        build: Activities = _no_activities
        # A workflows-only worker needs no cluster for its own queue: it reads the Campaigns (for
        # the members' workflows) with a client it makes when it first looks.
        home: Callable[[], ApiClient] = functools.partial(from_kubeconfig, settings.kubeconfig)
        activities: list[Callable[..., Any]] = []
        if settings.worker_role != "workflows":
            registered = SearchAttributeCheck(client, settings.temporal_namespace)
            await registered.check()
            rechecks = asyncio.create_task(registered.run(stop))
            resources.callback(rechecks.cancel)
            build = functools.partial(_activities, settings, unregistered=registered)
            api = from_kubeconfig(settings.kubeconfig)
            activities = build(api, resources)
            home = functools.partial(_same, api)
        workflows = settings.worker_role != "activities"
        worker = build_worker(
            client,
            activities,
            task_queue=settings.task_queue,
            max_concurrent_activities=settings.max_concurrent_activities,
            workflows=workflows,
        )
        members = MemberWorkers(
            client,
            home,
            settings.task_queue,
            build,
            namespace=settings.engine.package_namespace,
            workflows=workflows,
            max_concurrent_activities=settings.max_concurrent_activities,
        )
        # The watches stop after the worker: activities still finishing keep theirs.
        async with worker:
            log.info(
                "worker polling %s on %s for %s",
                settings.task_queue,
                settings.temporal_address,
                ROLES[settings.worker_role],
            )
            await members.run(stop)
    log.info("worker stopped")


def _no_activities(api: ApiClient, resources: contextlib.AsyncExitStack) -> list[Callable[..., Any]]:
    return []


def _same(api: ApiClient) -> ApiClient:
    return api


def _activities(
    settings: WorkerSettings,
    api: ApiClient,
    resources: contextlib.AsyncExitStack,
    *,
    unregistered: Callable[[], tuple[str, ...]],
) -> list[Callable[..., Any]]:
    """Every activity, on one Kubernetes client, one thread pool and one stage Job watch;
    ``unregistered`` says which search attributes the namespace lacks."""
    # Kubernetes calls run on threads that keep the activity's trace and log context.
    # One thread per activity slot: an activity makes one blocking call at a time, so no call ever
    # queues for a thread. With fewer threads than slots, a wide rollout's drain and stage waits
    # starve each other past the 30 s heartbeat timeout and the stages are retried over and over.
    threads = tracing.ContextThreadPool(
        max(DEFAULT_THREADS, settings.max_concurrent_activities), thread_name_prefix="fleetwright-kube"
    )
    # One watch of the stage Jobs serves every stage wait of this worker.
    job_watches = resources.enter_context(JobWatches(api))
    return [
        *all_activities(api, executor=threads, job_watches=job_watches),
        *rollout_activities(
            api,
            tracing.client_interceptors(),
            unregistered=unregistered,
            prometheus=settings.prometheus_access(),
            registry=settings.registry_access(),
        ),
        *health_activities(api, settings.prometheus_access(), executor=threads),
    ]
