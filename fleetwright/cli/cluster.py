"""``fleetwright cluster up``: the whole local stack (``local.stack``), kept running until Ctrl-C or
SIGTERM, with what a new user needs printed once it is ready: how to reach it, which examples to
apply and how to watch them, where the logs are, and how to stop it.

Owns the command and its text; starting and stopping the pieces is ``local.stack``'s.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fleetwright.api.keys import status_label_key
from fleetwright.cli.app import CommandGroup, app
from fleetwright.eventwait import wait_event
from fleetwright.process.shutdown import stop_on_signals

if TYPE_CHECKING:
    from rich.console import Console

    from fleetwright.local.stack import LocalStack

cluster_app = typer.Typer(
    cls=CommandGroup,
    help="The local stack: a real control plane with simulated GPU nodes, Temporal, and fleetwright's "
    "webhook, worker and controller.",
)
app.add_typer(cluster_app, name="cluster")


def next_steps(stack: LocalStack, kept: bool) -> list[str]:
    """What to do with a running stack, one command per line (never wrapped, so it can be pasted)."""
    from fleetwright.local.stack import example_profiles, examples_dir

    profile = next(iter(example_profiles()), "<profile>")
    examples = _shown(examples_dir())
    logs = stack.logs()
    ours = ", ".join(path.name for name, path in logs.items() if path.parent == stack.log_dir)
    lines = [
        f"  Kubernetes API   {stack.cluster.server}",
        f"  Temporal         {stack.temporal.address}   Web UI: {stack.ui_url}",
        *_metrics_lines(stack),
        *_registry_lines(stack),
        *_operator_lines(stack),
        f"  Work directory   {stack.workdir}" + ("" if kept else " (removed on stop; --workdir keeps one)"),
        "",
        "In another shell (from the repository):",
        f"  source {stack.env_path}  # KUBECONFIG, FLEETWRIGHT_TEMPORAL_ADDRESS, PROMETHEUS_URL, PATH",
        f"  kubectl apply -f {examples}/  # a DeploymentPolicy, a NodeProfile, a training Deployment",
        f"  fleetwright status {profile} --watch   # the rollout, live, until it ends",
        f"  kubectl get nodes -L {status_label_key(profile)}",
        "  kubectl get pods -n training -o wide   # placed by kube-scheduler, moved by the drains",
        *_campaign_lines(stack, examples),
        "",
        f"Logs: {stack.log_dir}/ ({ours})",
        f"      Temporal: {logs['temporal']}",
        f"Stop: Ctrl-C here, or kill -TERM {os.getpid()}: every process of the stack stops.",
    ]
    return lines + _real_node_steps(stack)


def _campaign_lines(stack: LocalStack, examples: str) -> list[str]:
    """With the three clusters the example Campaign names: how to roll it out across them."""
    from fleetwright.cli.democampaign import CAMPAIGN_CLUSTERS, CAMPAIGN_EXAMPLES, Approvals
    from fleetwright.local.stack import examples_dir

    if stack.members is None or len(stack.members.clusters) + 1 != CAMPAIGN_CLUSTERS:
        return []
    campaign = Approvals.of(examples_dir() / CAMPAIGN_EXAMPLES)
    return [
        f"  kubectl apply -f {examples}/{CAMPAIGN_EXAMPLES}/  # a Campaign over cluster-1, -2 and -3",
        f"  fleetwright campaign status {campaign.name}   # each cluster's rollout",
        *(f"  fleetwright campaign approve {campaign.name} {stage}" for stage in campaign.stages),
    ]


def _metrics_lines(stack: LocalStack) -> list[str]:
    """Where the Prometheus is, and how to make a simulated GPU go bad."""
    from fleetwright.local.gpuexporter import XID_ERRORS

    metrics = stack.gpu_metrics
    if metrics is None:
        return []
    exporter = metrics.exporter
    return [
        f"  Prometheus       {metrics.url}   {metrics.prometheus.version()}, scraping the GPU exporter "
        f"{exporter.url} every {metrics.prometheus.scrape_interval_seconds}s",
        f"  A bad GPU        curl -X PUT -d 79 {exporter.url}/nodes/{next(iter(exporter.nodes), '<node>')}"
        f"/gpus/0/{XID_ERRORS}",
    ]


def _registry_lines(stack: LocalStack) -> list[str]:
    """Where the OCI registry is and how to push an image to it."""
    registry = stack.registry
    if registry is None:
        return []
    return [
        f"  OCI registry     https://{registry.host}   started in {registry.startup_seconds:.2f}s; push: "
        f"skopeo copy --dest-cert-dir <dir with its ca.crt> oci-archive:<archive> docker://{registry.host}/<repo>:<tag>",
    ]


def _operator_lines(stack: LocalStack) -> list[str]:
    """The training operator (``--workloads``): what it runs and its log."""
    operator = stack.training_operator
    if operator is None:
        return []
    return [
        f"  Training jobs    Kubeflow training operator (PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob), "
        f"log: {operator.process.log_path}",
    ]


def _real_node_steps(stack: LocalStack) -> list[str]:
    """The real node, and the command that installs the chart on it instead of the host processes."""
    from fleetwright.local.nodeconfig import TEMPORAL_ADDRESS
    from fleetwright.local.realnode import chart_settings

    node = stack.cluster.real_node
    if node is None:
        return []
    install = [
        "helm",
        "install",
        "fleetwright",
        "helm/fleetwright",
        "-n",
        "fleetwright",
        "--create-namespace",
    ]
    return [
        "",
        f"Real node {node.options.name}: its stage pods mount the scratch host root {node.host_root.path}",
        "  fleetwright in-cluster on it (the chart, with this checkout's images from the OCI registry):",
        "  " + shlex.join([*install, *chart_settings(node, TEMPORAL_ADDRESS)]),
    ]


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is under it (shorter to paste)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@cluster_app.command("up")
def up(
    nodes: Annotated[int, typer.Option(help="Simulated GPU nodes to create (in racks and zones).")] = 24,
    workdir: Annotated[
        Path | None, typer.Option(help="Keep state and logs here, also after stopping (default: a temp dir).")
    ] = None,
    real_node: Annotated[
        bool,
        typer.Option(
            "--real-node",
            help="Also run one real node (kubelet, containerd, runc; needs root) with the images this "
            "checkout builds, its stage pods confined to a scratch host root.",
        ),
    ] = False,
    workloads: Annotated[
        bool,
        typer.Option(
            "--workloads",
            help="Also run the Kubeflow training operator (PyTorchJob, TFJob, ...) with its CRDs: "
            "training pods owned by their job, as on a real cluster.",
        ),
    ] = False,
    clusters: Annotated[
        int,
        typer.Option(
            min=1,
            max=8,
            help="Local control planes, each with NODES simulated nodes, all registered for campaigns "
            "(cluster-1 is the one the CLI talks to).",
        ),
    ] = 1,
) -> None:
    """Start the local stack, print how to use it, and keep it running until Ctrl-C or SIGTERM."""
    from fleetwright.cli.text import human_console
    from fleetwright.local.controlplane import ClusterOptions
    from fleetwright.local.realnode import RealNodeOptions
    from fleetwright.local.stack import LocalStack, StackOptions

    console = human_console()
    node = RealNodeOptions() if real_node else None
    options = StackOptions(
        cluster=ClusterOptions(nodes=nodes, scheduler=True, real_node=node),
        workdir=workdir,
        workloads=workloads,
        clusters=clusters,
    )
    where = f"in each of {clusters} clusters" if clusters > 1 else ""
    console.print(f"starting the local stack with {nodes} simulated GPU nodes{where and ' ' + where}...")
    with LocalStack(options) as stack:
        console.print(
            f"[green]ready[/] in {stack.startup_seconds:.0f}s: control plane, kube-scheduler, Temporal, "
            "CRDs, admission webhook, worker, controller, simulated reboots, GPU metrics, OCI registry"
            + (", Kubeflow training operator" if workloads else "")
            + (f", {clusters - 1} member clusters registered for campaigns" if clusters > 1 else "")
        )
        for line in next_steps(stack, kept=workdir is not None):
            console.print(line, markup=False, highlight=False)
        failed = asyncio.run(_run_until_stopped(console, stack))
        console.print("stopping...")
    console.print("stopped: no process left behind")
    if failed:
        raise typer.Exit(1)


async def _run_until_stopped(console: Console, stack: LocalStack) -> bool:
    """Until Ctrl-C or SIGTERM (the processes' one signal path); True when a piece of the stack
    exited on its own (it is named)."""
    stop = stop_on_signals()
    while not stop.is_set():
        try:
            stack.check_alive()
        except RuntimeError as error:
            console.print(str(error), style="red", markup=False, highlight=False)
            return True
        await wait_event(stop, 1.0)
    return False
