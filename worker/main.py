"""Runs the fleetwright worker: the rollout and node workflows and every Kubernetes activity,
until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal

from fleetwright.activities.node import all_activities
from fleetwright.activities.rollout import RolloutActivities
from fleetwright.kube.client import from_kubeconfig
from fleetwright.worker.settings import WorkerSettings
from fleetwright.worker.temporal import build_worker, connect

log = logging.getLogger("fleetwright.worker")


async def run_worker(settings: WorkerSettings, stop: asyncio.Event | None = None) -> None:
    api = from_kubeconfig(settings.kubeconfig)
    client = await connect(settings.temporal_address, settings.temporal_namespace)
    activities = [*all_activities(api), RolloutActivities(api).observe_and_decide]
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = build_worker(
        client,
        activities,
        task_queue=settings.task_queue,
        max_concurrent_activities=settings.max_concurrent_activities,
    )
    async with worker:
        log.info("worker polling %s on %s", settings.task_queue, settings.temporal_address)
        await stop.wait()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run_worker(WorkerSettings.load()))


if __name__ == "__main__":
    main()
