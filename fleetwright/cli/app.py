"""The root typer application every command module registers on, and the global options (where
the cluster and Temporal are) that the operator commands read from the context.

Every command module is imported to list or parse its command, so it imports only what its options
need (typer, rich, constants); what a command does, with the Temporal and Kubernetes clients and
the pydantic models behind it, is imported in the command's body when it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetwright.cli.session import Target
from fleetwright.process.defaults import TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE

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
    ] = TEMPORAL_ADDRESS,
    temporal_namespace: Annotated[
        str,
        typer.Option(
            "--temporal-namespace", envvar="FLEETWRIGHT_TEMPORAL_NAMESPACE", help="Temporal namespace."
        ),
    ] = TEMPORAL_NAMESPACE,
) -> None:
    """Roll host-layer changes (sysctl, GRUB, drivers, agents) across GPU node fleets safely."""
    ctx.obj = Target(kubeconfig, temporal_address, temporal_namespace)
