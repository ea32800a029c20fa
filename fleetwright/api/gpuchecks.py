"""The metric checks fleetwright ships for dcgm-exporter's GPU health series: XID errors,
uncorrectable remapped rows, row-remap failures and PCIe replays.

dcgm-exporter renamed fields across releases and clusters relabel the node differently, so the
metric names and the node label are parameters (``DcgmNames``); ``fleetwright health-checks dcgm``
prints the checks for a policy's ``healthChecks`` with the names a cluster uses. Each check reads
a window that covers the gate (``window``): a node passes only if its series did not move in it.
No data (the exporter is not scraped there) is Inconclusive, never a pass. ``dcgm_diag`` is the
validation container that runs the host's ``dcgmi diag`` from the catalog's gpu-health image.
Pure; no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fleetwright.api.health import MetricCheck, ValidationContainer

GPU_HEALTH_IMAGE = "ghcr.io/fleetwright/packages/gpu-health:1.0.0"
"""The catalog's gpu-health image (busybox: its ``chroot`` runs the host's ``dcgmi``)."""
DIAG_TIMEOUTS = {1: 300, 2: 900, 3: 3600, 4: 4 * 3600}
"""Seconds each ``dcgmi diag`` run level may take: seconds, minutes, tens of minutes, hours."""


class DcgmNames(BaseModel):
    """The series' names and the label naming the node, as the cluster's dcgm-exporter has them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    xid: str = Field(
        default="DCGM_FI_DEV_XID_ERRORS",
        description="The XID gauge (it holds the last XID, so the check counts its changes()).",
    )
    uncorrectable_remapped_rows: str = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    row_remap_failure: str = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
    pcie_replays: str = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    node_label: str = Field(default="Hostname", description="The label that carries the node's name.")


DEFAULT_NAMES = DcgmNames()


def dcgm_checks(
    names: DcgmNames = DEFAULT_NAMES,
    *,
    window: str = "10m",
    count: int = 3,
    interval_seconds: int = 60,
    pcie_replays_max: int = 0,
) -> list[MetricCheck]:
    """The four GPU health checks over the node's GPUs (every series of the node must pass)."""
    node = names.node_label + '="{{node}}"'
    steady = "all(r == 0 for r in result)"
    moved = "any(r > 0 for r in result)"
    timing = {"count": count, "interval_seconds": interval_seconds}
    return [
        MetricCheck(
            name="gpu-xid-errors",
            query=f"changes({names.xid}{{{node}}}[{window}])",
            success_condition=steady,
            failure_condition=moved,
            **timing,
        ),
        MetricCheck(
            name="gpu-uncorrectable-remapped-rows",
            query=f"increase({names.uncorrectable_remapped_rows}{{{node}}}[{window}])",
            success_condition=steady,
            failure_condition=moved,
            **timing,
        ),
        MetricCheck(
            name="gpu-row-remap-failure",
            query=f"max_over_time({names.row_remap_failure}{{{node}}}[{window}])",
            success_condition=steady,
            failure_condition=moved,
            **timing,
        ),
        MetricCheck(
            name="gpu-pcie-replays",
            query=f"increase({names.pcie_replays}{{{node}}}[{window}])",
            success_condition=f"all(r <= {pcie_replays_max} for r in result)",
            failure_condition=f"any(r > {pcie_replays_max} for r in result)",
            **timing,
        ),
    ]


def dcgm_diag(level: int) -> ValidationContainer:
    """A privileged validation running ``dcgmi diag -r <level>`` in the host's root: a failed DCGM
    test exits non-zero and fails the node."""
    if level not in DIAG_TIMEOUTS:
        raise ValueError(f"dcgmi diag run level must be one of {sorted(DIAG_TIMEOUTS)}, got {level}")
    return ValidationContainer(
        name="dcgm-diag",
        image=GPU_HEALTH_IMAGE,
        command=["chroot", "/host", "dcgmi", "diag", "-r", str(level)],
        timeout_seconds=DIAG_TIMEOUTS[level],
        privileged=True,
    )
