"""``fleetwright demo``: the main job on the embedded default, end to end on one machine.

Starts a Temporal dev server (with its Web UI), the local control plane with simulated GPU nodes,
the worker and the controller; installs the CRDs; applies the example NodeProfile (the ``tuning``
package with a reboot) and DeploymentPolicy (canary 1 -> soak -> exponential batches) with
kubectl; shows the rollout live from the NodeProfile's status; and stops everything on Ctrl-C or
when the rollout ends (unless ``--keep-running``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from fleetwright.api.crdgen import CRDS, rendered_files
from fleetwright.api.keys import status_label_key
from fleetwright.cli.app import app
from fleetwright.localcluster import examples
from fleetwright.localcluster.cluster import ClusterOptions, LocalCluster, wait_established
from fleetwright.localcluster.kubelet import SimulatedKubelet
from fleetwright.localcluster.nodes import OUTCOME_LABEL, stage_pod_timing
from fleetwright.localcluster.temporal import LocalTemporal
from fleetwright.stagejob.render import PACKAGE_NAMESPACE
from fleetwright.worker.controller import ControllerOptions, run_controller
from fleetwright.worker.main import run_worker
from fleetwright.worker.settings import WorkerSettings
from fleetwright.workflows.payloads import EngineSettings
from fleetwright.workflows.search import REGISTRATION

console = Console()
PROFILE = "demo-tuning"
POLICY = "demo-careful"
# Each simulated package stage takes a second on a kwok node.
STAGE_POD_ANNOTATIONS = stage_pod_timing(1.0, ready_seconds=0.2)
FINAL_PHASES = ("Complete", "Failed")


def demo_manifests(nodes: int) -> list[dict[str, Any]]:
    """The example profile and policy: canary 1 -> 10 s soak -> exponential batches."""
    profile = examples.profile(
        PROFILE,
        interrupt="reboot",
        selector={"nvidia.com/gpu.present": "true"},
        policy=POLICY,
        config={"sysctl.conf": "net.core.rmem_max=268435456\nvm.max_map_count=262144\n"},
    )
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 10}},
        {"name": "rest", "batches": {"strategy": "exponential", "initial": 2, "growthFactor": 2}},
    ]
    policy = examples.policy(POLICY, max_unavailable=max(2, nodes // 4), steps=steps)
    dump: list[dict[str, Any]] = []
    for model in (policy, profile):
        body = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        body["metadata"] = {"name": body["metadata"]["name"]}  # the apiserver owns uid/generation
        dump.append(body)
    return dump


def _status(cluster: LocalCluster) -> dict[str, Any]:
    result = cluster.kubectl("get", "nodeprofile", PROFILE, "-o", "json", check=False)
    if result.returncode != 0:
        return {}
    status: dict[str, Any] = json.loads(result.stdout).get("status") or {}
    return status


def _table(status: dict[str, Any], elapsed: float) -> Table:
    table = Table(title=f"nodeprofile/{PROFILE}  ({elapsed:.0f}s)", show_lines=False)
    for column in ("phase", "step", "complete", "in progress", "failed", "blocked"):
        table.add_column(column)
    table.add_row(
        str(status.get("phase", "Pending")),
        str(status.get("currentStep") or ""),
        str(status.get("progress", "")),
        str(status.get("nodesInProgress", 0)),
        str(status.get("nodesFailed", 0)),
        str(status.get("nodesBlocked", 0)),
    )
    for issue in (status.get("nodeIssues") or [])[:5]:
        table.add_row(
            "", f"[red]{issue.get('node')}[/]", issue.get("reason", ""), issue.get("message", "")[:80]
        )
    return table


async def _watch(cluster: LocalCluster, stop: asyncio.Event, within: float) -> dict[str, Any]:
    started = time.monotonic()
    status: dict[str, Any] = {}
    with Live(_table(status, 0), console=console, refresh_per_second=2) as live:
        while not stop.is_set() and time.monotonic() - started < within:
            status = await asyncio.to_thread(_status, cluster)
            live.update(_table(status, time.monotonic() - started))
            if status.get("phase") in FINAL_PHASES and status.get("observedGeneration"):
                break
            await asyncio.sleep(1.0)
    return status


async def _run(nodes: int, fail_canary: bool, keep_running: bool, within: float) -> int:
    stop = asyncio.Event()
    with (
        LocalCluster(ClusterOptions(nodes=nodes)) as cluster,
        LocalTemporal(search_attributes=REGISTRATION) as temporal,
        SimulatedKubelet(cluster.kubectl),
    ):
        console.print(f"[green]control plane[/] with {nodes} GPU nodes up in {cluster.startup_seconds:.1f}s")
        console.print(f"[green]Temporal[/] {temporal.address}   Web UI: [bold]{temporal.ui_url}[/]")
        crds = list(rendered_files().values())
        cluster.kubectl("apply", "-f", "-", input="---\n".join(crds))
        wait_established(cluster.kubectl, [spec.name for spec in CRDS])
        engine = EngineSettings(
            observe_interval_seconds=3,
            drain_poll_seconds=1.0,
            stage_backoff_limit=0,
            stage_pod_annotations=STAGE_POD_ANNOTATIONS,
            stage_pod_labels={OUTCOME_LABEL: "fail"} if fail_canary else {},
        )
        settings = WorkerSettings(
            temporal_address=temporal.address, kubeconfig=cluster.kubeconfig, engine=engine
        )
        tasks = [
            asyncio.create_task(run_worker(settings, stop)),
            asyncio.create_task(run_controller(settings, stop, ControllerOptions(status_interval_seconds=2))),
        ]
        try:
            cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(demo_manifests(nodes)))
            console.print(f"applied nodeprofile/{PROFILE} and deploymentpolicy/{POLICY}")
            status = await _watch(cluster, stop, within)
            _summary(cluster, temporal, status)
            if keep_running and not stop.is_set():
                console.print("still running: Ctrl-C stops everything")
                await stop.wait()
        finally:
            stop.set()
            # The watchers see the apiserver go away during shutdown; that is not news.
            logging.getLogger("fleetwright").setLevel(logging.ERROR)
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, timeout=15)
    console.print("stopped: no process left behind")
    wanted = "Failed" if fail_canary else "Complete"
    return 0 if status.get("phase") == wanted else 1


def _summary(cluster: LocalCluster, temporal: LocalTemporal, status: dict[str, Any]) -> None:
    phase = status.get("phase", "unknown")
    colour = "green" if phase == "Complete" else "red"
    console.print(f"rollout [{colour}]{phase}[/]: {status.get('progress', '')} nodes complete")
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True":
            console.print(
                f"  {condition['type']}: {condition.get('reason')} — {condition.get('message', '')}"
            )
    console.print("Look around:")
    console.print(f"  export KUBECONFIG={cluster.kubeconfig}")
    console.print(f"  kubectl get nodeprofiles,deploymentpolicies   kubectl describe nodeprofile {PROFILE}")
    console.print(
        f"  kubectl get nodes -L {status_label_key(PROFILE)}   kubectl get jobs -n {PACKAGE_NAMESPACE}"
    )
    console.print(f"  Temporal UI: {temporal.ui_url}/namespaces/default/workflows")


@app.command("demo")
def demo(
    nodes: Annotated[int, typer.Option(help="Simulated GPU nodes (in racks and zones).")] = 24,
    fail_canary: Annotated[
        bool, typer.Option(help="Make every stage fail: the canary halts the rollout.")
    ] = False,
    keep_running: Annotated[bool, typer.Option(help="Keep everything up after the rollout ends.")] = False,
    timeout: Annotated[float, typer.Option(help="Give up watching after this many seconds.")] = 600.0,
) -> None:
    """Run a whole rollout on a local fleet: control plane, Temporal, worker, controller, live view."""
    raise typer.Exit(asyncio.run(_run(nodes, fail_canary, keep_running, timeout)))
