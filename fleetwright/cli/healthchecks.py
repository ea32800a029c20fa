"""``fleetwright health-checks dcgm``: print the shipped GPU health checks (dcgm-exporter series)
as a DeploymentPolicy's ``healthChecks`` and ``nodeGate``, with the metric names and node label the
cluster's dcgm-exporter uses (and, with ``--diag-level``, a ``dcgmi diag`` validation). Owns the
command; the checks are ``fleetwright.api.gpuchecks``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fleetwright.cli.app import app

health_app = typer.Typer(
    help="Ready-made metric checks for a DeploymentPolicy's node gate.", no_args_is_help=True
)
app.add_typer(health_app, name="health-checks")


@health_app.command("dcgm")
def dcgm_command(
    *,
    xid: Annotated[str, typer.Option("--xid-metric", help="The XID gauge.")] = "DCGM_FI_DEV_XID_ERRORS",
    remapped: Annotated[
        str, typer.Option("--remapped-rows-metric", help="Uncorrectable remapped rows.")
    ] = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    remap_failure: Annotated[
        str, typer.Option("--row-remap-failure-metric", help="Row-remap failure.")
    ] = "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    pcie: Annotated[
        str, typer.Option("--pcie-replays-metric", help="PCIe replay counter.")
    ] = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    node_label: Annotated[str, typer.Option("--node-label", help="The label naming the node.")] = "Hostname",
    window: Annotated[str, typer.Option("--window", help="PromQL range each check reads.")] = "10m",
    count: Annotated[int, typer.Option("--count", min=1, help="Measurements per check.")] = 3,
    interval: Annotated[int, typer.Option("--interval", min=1, help="Seconds between measurements.")] = 60,
    pcie_replays_max: Annotated[
        int, typer.Option("--pcie-replays-max", min=0, help="PCIe replays tolerated in the window.")
    ] = 0,
    diag_level: Annotated[
        int,
        typer.Option(
            "--diag-level",
            min=0,
            max=4,
            help="Also a validation running the host's `dcgmi diag -r N` from the gpu-health image "
            "(privileged); 0: none.",
        ),
    ] = 0,
) -> None:
    """Print healthChecks and a nodeGate running them, to paste into a DeploymentPolicy's spec."""
    import yaml

    from fleetwright.api.gpuchecks import DcgmNames, dcgm_checks, dcgm_diag

    names = DcgmNames(
        xid=xid,
        uncorrectable_remapped_rows=remapped,
        row_remap_failure=remap_failure,
        pcie_replays=pcie,
        node_label=node_label,
    )
    checks = dcgm_checks(
        names, window=window, count=count, interval_seconds=interval, pcie_replays_max=pcie_replays_max
    )
    gate: dict[str, Any] = {"checks": [c.name for c in checks]}
    if diag_level:
        gate["validations"] = [
            dcgm_diag(diag_level).model_dump(mode="json", by_alias=True, exclude_defaults=True)
        ]
    spec = {
        "healthChecks": [c.model_dump(mode="json", by_alias=True, exclude_defaults=True) for c in checks],
        "nodeGate": gate,
    }
    typer.echo(yaml.safe_dump(spec, sort_keys=False).rstrip())
