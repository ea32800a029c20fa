"""``fleetwright worker``, ``fleetwright controller`` and ``fleetwright webhook``: the long-running
processes the Helm chart deploys. Each reads ``WorkerSettings.load()`` (the JSON file named by
FLEETWRIGHT_SETTINGS, then FLEETWRIGHT_* overrides; ``--help`` lists every setting), configures
logs, metrics and traces, and stops cleanly (exit 0) on SIGTERM or SIGINT.

Owns process wiring only; what each process does lives in ``fleetwright.worker``.
"""

from __future__ import annotations

import asyncio
import logging

from typer.core import TyperCommand

from fleetwright.cli.app import app
from fleetwright.process.shutdown import stop_on_signals

log = logging.getLogger("fleetwright.serve")


class ProcessCommand(TyperCommand):
    """A process command: its help ends with the settings reference, built only when the help is
    shown (the settings model is not imported to list or run the other commands)."""

    @property
    def epilog(self) -> str:
        from fleetwright.process.settingsdoc import help_text

        return help_text()

    @epilog.setter
    def epilog(self, _ignored: str | None) -> None:
        """Click sets the epilog it was given (none)."""


@app.command("worker", cls=ProcessCommand)
def worker() -> None:
    """Run the worker: the rollout and node workflows and the Kubernetes activities."""
    from fleetwright.process.settings import WorkerSettings
    from fleetwright.worker.main import observability, run_worker

    settings = WorkerSettings.load()

    async def run() -> None:
        stop = stop_on_signals()
        with observability(settings, "worker"):
            await run_worker(settings, stop)

    asyncio.run(run())


@app.command("controller", cls=ProcessCommand)
def controller() -> None:
    """Run the controller: NodeProfile/DeploymentPolicy/Node watches -> rollout workflows, status."""
    from fleetwright.controller.reconcile import run_controller
    from fleetwright.process.settings import WorkerSettings
    from fleetwright.worker.main import observability

    settings = WorkerSettings.load()

    async def run() -> None:
        stop = stop_on_signals()
        with observability(settings, "controller"):
            await run_controller(settings, stop)
        log.info("controller stopped")

    asyncio.run(run())


@app.command("webhook", cls=ProcessCommand)
def webhook() -> None:
    """Run the validating admission webhook (HTTPS) for NodeProfiles and DeploymentPolicies."""
    from fleetwright.kube.client import from_kubeconfig
    from fleetwright.kube.resources import ApiResourceLookup
    from fleetwright.process.settings import WorkerSettings
    from fleetwright.webhook.review import load_admission_policy
    from fleetwright.webhook.server import WebhookServer
    from fleetwright.worker.main import observability

    settings = WorkerSettings.load()

    async def run() -> None:
        stop = stop_on_signals()
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
            with server:
                log.info("webhook serving on %s:%d", settings.webhook_host, server.port)
                await stop.wait()
        log.info("webhook stopped")

    asyncio.run(run())
