"""The worker's member clusters: for every kubeconfig Secret a Campaign names, one more Temporal
worker, polling that member's task queue (``workflows.ids.member_task_queue``) with every activity
bound to a Kubernetes client for that cluster. A campaign's rollout in a member cluster is the
same rollout workflow as a NodeProfile's, started on that queue, so its activities reach the
member's API server and nothing else changes.

The home cluster's client is made when the Campaigns are first looked for (a workflows-only worker
needs no cluster otherwise; one it cannot reach is warned about and looked for again). The Secrets
are read from the package namespace (``namespace``) (where the worker already reads Secrets); the
Campaigns are looked for again every ``interval``. A member whose Secret is missing or holds no
usable kubeconfig is logged and looked for again; one no campaign names any more keeps its worker
until the process stops (a rollout of it may still be finishing). Must not decide anything."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from temporalio.client import Client

from fleetwright.api.campaign import KUBECONFIG_KEY, PLURAL
from fleetwright.errors import FleetwrightError
from fleetwright.eventwait import wait_event
from fleetwright.kube import resources, secrets
from fleetwright.kube.client import ApiClient, from_kubeconfig_text
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.ids import member_task_queue

log = logging.getLogger("fleetwright.worker.members")

Activities = Callable[[ApiClient, contextlib.AsyncExitStack], Sequence[Callable[..., Any]]]


def named_secrets(campaigns: list[dict[str, Any]]) -> list[str]:
    """The kubeconfig Secrets the campaigns name, each once, in order (a campaign whose spec does
    not have the shape is skipped: admission refuses it, the controller reports it)."""
    found: list[str] = []
    for campaign in campaigns:
        clusters = ((campaign.get("spec") or {}).get("clusters")) or []
        for cluster in clusters if isinstance(clusters, list) else []:
            secret = cluster.get("kubeconfigSecret") if isinstance(cluster, dict) else None
            if isinstance(secret, str) and secret and secret not in found:
                found.append(secret)
    return found


class MemberWorkers:
    """One worker per member cluster, started as the campaigns name them."""

    def __init__(
        self,
        client: Client,
        home: Callable[[], ApiClient],
        task_queue: str,
        activities: Activities,
        *,
        namespace: str,
        workflows: bool = True,
        max_concurrent_activities: int = 200,
        interval: float = 10.0,
    ) -> None:
        self._client, self._make_home, self._task_queue, self._namespace = client, home, task_queue, namespace
        self._home: ApiClient | None = None
        self._activities, self._workflows = activities, workflows
        self._max_concurrent_activities, self._interval = max_concurrent_activities, interval
        self._warned: set[str] = set()
        self.serving: dict[str, str] = {}
        """Secret -> the task queue its worker polls."""

    async def run(self, stop: asyncio.Event) -> None:
        """Start a worker for each member as the campaigns name it, until ``stop``."""
        async with contextlib.AsyncExitStack() as workers:
            while not stop.is_set():
                await self.refresh(workers)
                await wait_event(stop, self._interval)
        log.info("member workers stopped")

    async def refresh(self, workers: contextlib.AsyncExitStack) -> None:
        try:
            home = self._home = self._home or self._make_home()
            campaigns = await asyncio.to_thread(resources.list_objects, home, PLURAL)
        except FleetwrightError as error:
            self._warn(f"campaigns not listed: {error}")
            return
        for secret in named_secrets(campaigns):
            if secret not in self.serving:
                await self._start(home, secret, workers)

    def _warn(self, message: str) -> None:
        """Each different problem once: a cluster without the Campaign CRD is not news every poll."""
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    async def _start(self, home: ApiClient, secret: str, workers: contextlib.AsyncExitStack) -> None:
        try:
            entries = await asyncio.to_thread(secrets.secret_text, home, self._namespace, secret)
            text = entries.get(KUBECONFIG_KEY)
            if text is None:
                self._warn(f"secret {self._namespace}/{secret} has no {KUBECONFIG_KEY} key")
                return
            api = from_kubeconfig_text(text, f"secret {self._namespace}/{secret}")
        except FleetwrightError as error:
            self._warn(f"member cluster of secret {self._namespace}/{secret}: {error}")
            return
        queue = member_task_queue(self._task_queue, secret)
        try:
            worker = build_worker(
                self._client,
                self._activities(api, workers),
                task_queue=queue,
                max_concurrent_activities=self._max_concurrent_activities,
                workflows=self._workflows,
            )
            await workers.enter_async_context(worker)
        except Exception:  # one member must never take the worker of every other cluster down
            log.exception("member worker for secret %s/%s not started", self._namespace, secret)
            return
        self.serving[secret] = queue
        log.info("worker polling %s for the member cluster of secret %s", queue, secret)
