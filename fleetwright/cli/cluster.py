"""``fleetwright cluster up``: run the local control plane (and optionally Temporal) until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fleetwright.cli.app import app
from fleetwright.localcluster.cluster import ClusterOptions, LocalCluster
from fleetwright.localcluster.temporal import LocalTemporal

cluster_app = typer.Typer(
    help="The local control plane: real etcd, kube-apiserver, controller-manager, kwok."
)
app.add_typer(cluster_app, name="cluster")
console = Console()


@cluster_app.command("up")
def up(
    nodes: Annotated[int, typer.Option(help="Simulated GPU nodes to create.")] = 24,
    workdir: Annotated[Path | None, typer.Option(help="Keep state here (default: a temp dir).")] = None,
    temporal: Annotated[bool, typer.Option(help="Also start a Temporal dev server with its UI.")] = True,
) -> None:
    """Start everything on loopback, print how to reach it, and stop cleanly on Ctrl-C."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LocalCluster(ClusterOptions(nodes=nodes, workdir=workdir)) as cluster:
        console.print(f"[green]control plane ready[/] in {cluster.startup_seconds:.1f}s with {nodes} nodes")
        console.print(f"  export KUBECONFIG={cluster.kubeconfig}")
        temporal_server = LocalTemporal() if temporal else None
        try:
            if temporal_server is not None:
                temporal_server.start()
                console.print(f"  Temporal: {temporal_server.address}   UI: {temporal_server.ui_url}")
            console.print("Ctrl-C stops everything.")
            try:
                while not stop.wait(1.0):
                    pass
            except KeyboardInterrupt:
                pass
        finally:
            if temporal_server is not None:
                temporal_server.stop()
    console.print("stopped")
