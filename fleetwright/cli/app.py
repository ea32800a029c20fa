"""The root typer application every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="fleetwright",
    help="Roll host-layer changes (sysctl, GRUB, drivers, agents) across GPU node fleets safely.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
