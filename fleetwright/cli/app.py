"""The root typer application every command module registers on, and the global options (where
the cluster and Temporal are) that the operator commands read from the context."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetwright.cli.session import Target
from fleetwright.worker.settings import WorkerSettings

_DEFAULTS = WorkerSettings()

app = typer.Typer(
    name="fleetwright",
    help="Roll host-layer changes (sysctl, GRUB, drivers, agents) across GPU node fleets safely.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            envvar="FLEETWRIGHT_KUBECONFIG",
            help="Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).",
        ),
    ] = None,
    temporal_address: Annotated[
        str,
        typer.Option(
            "--temporal-address", envvar="FLEETWRIGHT_TEMPORAL_ADDRESS", help="Temporal frontend host:port."
        ),
    ] = _DEFAULTS.temporal_address,
    temporal_namespace: Annotated[
        str,
        typer.Option(
            "--temporal-namespace", envvar="FLEETWRIGHT_TEMPORAL_NAMESPACE", help="Temporal namespace."
        ),
    ] = _DEFAULTS.temporal_namespace,
) -> None:
    """Roll host-layer changes (sysctl, GRUB, drivers, agents) across GPU node fleets safely."""
    ctx.obj = Target(kubeconfig, temporal_address, temporal_namespace)
