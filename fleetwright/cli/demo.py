"""``fleetwright demo``: the main job on the embedded default, end to end on one machine.

Brings the local stack up (``local.stack``: control plane with simulated GPU nodes and
kube-scheduler, Temporal with its Web UI, CRDs, admission webhook, worker, controller, simulated
reboots), applies the repository's examples (``examples/``: a canary-then-batches policy, the
``tuning`` package with a reboot, and a training Deployment with a PodDisruptionBudget), shows the
rollout live from the NodeProfile's status, and stops everything on Ctrl-C or when the rollout
ends (unless ``--keep-running``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.api.keys import SEARCHABLE, status_label_key
from fleetwright.cli.app import app
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from fleetwright.local.stack import LocalStack

FINAL_PHASES = ("Complete", "Halted")


def _status(stack: LocalStack, profile: str) -> dict[str, Any]:
    result = stack.cluster.kubectl("get", "nodeprofile", profile, "-o", "json", check=False)
    if result.returncode != 0:
        return {}
    status: dict[str, Any] = json.loads(result.stdout).get("status") or {}
    return status


def _table(profile: str, status: dict[str, Any], elapsed: float) -> Table:
    from rich.table import Table

    table = Table(title=f"nodeprofile/{profile}  ({elapsed:.0f}s)", title_justify="left")
    for column in ("phase", "step", "complete", "in progress", "failed", "blocked"):
        table.add_column(column, no_wrap=True)
    table.add_row(
        str(status.get("phase", "Pending")),
        str(status.get("currentStep") or ""),
        str(status.get("progress", "")),
        str(status.get("nodesInProgress", 0)),
        str(status.get("nodesFailed", 0)),
        str(status.get("nodesBlocked", 0)),
    )
    for issue in (status.get("nodeIssues") or [])[:5]:
        table.add_row("", f"[red]{issue.get('node')}[/]", issue.get("reason", ""), issue.get("message", ""))
    return table


def _watch(console: Console, stack: LocalStack, profile: str, within: float) -> dict[str, Any]:
    from fleetwright.cli.text import refreshing

    started = time.monotonic()
    status: dict[str, Any] = {}
    with refreshing(console) as show:
        while time.monotonic() - started < within:
            status = _status(stack, profile)
            show(_table(profile, status, time.monotonic() - started))
            if status.get("phase") in FINAL_PHASES and status.get("observedGeneration"):
                break
            stack.check_alive()
            time.sleep(1.0)
    return status


def _summary(console: Console, stack: LocalStack, profile: str, status: dict[str, Any]) -> None:
    phase = status.get("phase", "unknown")
    colour = "green" if phase == "Complete" else "red"
    console.print(f"rollout [{colour}]{phase}[/]: {status.get('progress', '')} nodes complete")
    for condition in status.get("conditions") or []:
        problem = condition.get("type") == SEARCHABLE and condition.get("status") == "False"
        if (condition.get("status") == "True" and condition.get("message")) or problem:
            console.print(
                f"  {condition['type']}: {condition.get('reason')} — {condition.get('message', '')}",
                markup=False,
            )
    hints = [
        "Look around:",
        f"  export KUBECONFIG={stack.cluster.kubeconfig}",
        "  kubectl get nodeprofiles,deploymentpolicies",
        f"  kubectl describe nodeprofile {profile}",
        f"  kubectl get nodes -L {status_label_key(profile)}",
        f"  kubectl get jobs -n {PACKAGE_NAMESPACE}",
        f"  Temporal UI: {stack.ui_url}/namespaces/default/workflows",
    ]
    for line in hints:
        console.print(line, markup=False, highlight=False)


def _run(nodes: int, fail_canary: bool, keep_running: bool, within: float) -> int:
    from fleetwright.cli.text import human_console
    from fleetwright.local.controlplane import ClusterOptions
    from fleetwright.local.nodes import OUTCOME_LABEL
    from fleetwright.local.stack import (
        LOCAL_ENGINE,
        LocalStack,
        StackOptions,
        example_profiles,
        examples_dir,
    )

    engine = LOCAL_ENGINE
    if fail_canary:
        engine = engine.model_copy(update={"stage_pod_labels": {OUTCOME_LABEL: "fail"}})
    options = StackOptions(cluster=ClusterOptions(nodes=nodes, scheduler=True), engine=engine)
    profile = example_profiles()[0]
    console = human_console()
    with LocalStack(options) as stack:
        console.print(f"[green]local stack[/] with {nodes} GPU nodes up in {stack.startup_seconds:.1f}s")
        console.print(f"[green]Temporal[/] {stack.temporal.address}   Web UI: [bold]{stack.ui_url}[/]")
        status: dict[str, Any] = {}
        try:
            stack.cluster.kubectl("apply", "-f", str(examples_dir()))
            console.print(f"applied {examples_dir()}/: rolling out nodeprofile/{profile}")
            status = _watch(console, stack, profile, within)
            _summary(console, stack, profile, status)
            if keep_running:
                console.print("still running: Ctrl-C stops everything")
                _wait_for_interrupt(stack)
        except KeyboardInterrupt:
            console.print("interrupted: stopping")
    console.print("stopped: no process left behind")
    wanted = "Halted" if fail_canary else "Complete"
    return 0 if status.get("phase") == wanted else 1


def _wait_for_interrupt(stack: LocalStack) -> None:
    while True:
        time.sleep(1.0)
        stack.check_alive()


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
    raise typer.Exit(_run(nodes, fail_canary, keep_running, timeout))
