"""``fleetwright worker``, ``fleetwright controller`` and ``fleetwright webhook``: the long-running
processes the Helm chart deploys. Each reads ``WorkerSettings.load()`` (the JSON file named by
FLEETWRIGHT_SETTINGS, then FLEETWRIGHT_* overrides), configures logs, metrics and traces, and
stops cleanly (exit 0) on SIGTERM or SIGINT.

Owns process wiring only; what each process does lives in ``fleetwright.worker``.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from fleetwright.cli.app import app
from fleetwright.kube.client import from_kubeconfig
from fleetwright.kube.resources import ApiResourceLookup
from fleetwright.worker.controller import run_controller
from fleetwright.worker.main import observability, serve_worker
from fleetwright.worker.settings import WorkerSettings
from fleetwright.worker.webhook import WebhookServer, load_admission_policy

log = logging.getLogger("fleetwright.serve")


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM (the kubelet stopping the pod) or SIGINT (Ctrl-C)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


@app.command("worker")
def worker() -> None:
    """Run the worker: the rollout and node workflows and the Kubernetes activities."""
    asyncio.run(serve_worker(WorkerSettings.load()))


@app.command("controller")
def controller() -> None:
    """Run the controller: NodeProfile/DeploymentPolicy/Node watches -> rollout workflows, status."""
    settings = WorkerSettings.load()

    async def run() -> None:
        with observability(settings, "controller"):
            await run_controller(settings, _stop_on_signals())
        log.info("controller stopped")

    asyncio.run(run())


@app.command("webhook")
def webhook() -> None:
    """Run the validating admission webhook (HTTPS) for NodeProfiles and DeploymentPolicies."""
    settings = WorkerSettings.load()

    async def run() -> None:
        with observability(settings, "webhook"):
            lookup = ApiResourceLookup(from_kubeconfig(settings.kubeconfig))
            server = WebhookServer(
                lookup,
                admission=load_admission_policy(),
                cert_file=settings.webhook_cert_file,
                key_file=settings.webhook_key_file,
                host=settings.webhook_host,
                port=settings.webhook_port,
            )
            stop = _stop_on_signals()
            with server:
                log.info("webhook serving on %s:%d", settings.webhook_host, server.port)
                await stop.wait()
        log.info("webhook stopped")

    asyncio.run(run())
