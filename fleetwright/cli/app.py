"""The root typer application every command module registers on, the global options (where
the cluster and Temporal are) that the operator commands read from the context, and how help reads.

Every command module is imported to list or parse its command, so it imports only what its options
need (typer, constants); what a command does, with the Temporal and Kubernetes clients, rich and
the pydantic models behind it, is imported in the command's body when it runs. Help is click's
plain text, as kubectl's: typer's rich help imports rich's markdown and syntax highlighting, which
cost more than the rest of a ``--help``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

from fleetwright.cli.session import Target
from fleetwright.process.defaults import TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE

if TYPE_CHECKING:
    from typer._click import Context, HelpFormatter


class CommandGroup(TyperGroup):
    """A command group whose help lists each command with the whole first sentence of its help,
    wrapped, where click would cut it at the terminal's width."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    name="fleetwright",
    cls=CommandGroup,
    help="Roll host-layer changes (sysctl, GRUB, drivers, agents) across GPU node fleets safely.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
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
