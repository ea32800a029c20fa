"""Runs the fleetwright worker or controller as its own process for the benchmarks, so each one's
peak RSS and CPU seconds can be read from /proc.

``python bench/serve.py worker|controller`` with ``FLEETWRIGHT_SETTINGS`` naming a settings JSON.
Its only difference from the product entry points: the Kubernetes client sends the User-Agent
``fleetwright-worker`` or ``fleetwright-controller`` so the apiserver's audit log can attribute
every request (the product's client sends the generic ``OpenAPI-Generator/...`` agent).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from fleetwright.controller import reconcile as controller
from fleetwright.controller.reconcile import ControllerOptions, run_controller
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.process.settings import WorkerSettings
from fleetwright.process.shutdown import run_and_exit, stop_on_signals
from fleetwright.worker import main


def tagged(agent: str) -> Callable[..., ApiClient]:
    def build(path: Path | str | None = None, *, context: str | None = None) -> ApiClient:
        api = from_kubeconfig(path, context=context)
        api.user_agent = agent
        return api

    return build


async def serve(role: str, settings: WorkerSettings) -> None:
    stop = stop_on_signals()
    if role == "worker":
        main.from_kubeconfig = tagged("fleetwright-worker")  # type: ignore[attr-defined]
        await main.run_worker(settings, stop)
    elif role == "controller":
        controller.from_kubeconfig = tagged("fleetwright-controller")  # type: ignore[attr-defined]
        await run_controller(settings, stop, ControllerOptions())
    else:
        raise SystemExit(f"unknown role {role!r}: worker or controller")


def run() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(serve(sys.argv[1], WorkerSettings.load()))


if __name__ == "__main__":
    run_and_exit(run)
