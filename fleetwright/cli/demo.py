"""``fleetwright demo``: the main job on the embedded default, end to end on one machine.

Brings the local stack up (``local.stack``: control plane with simulated GPU nodes and
kube-scheduler, Temporal with its Web UI, CRDs, admission webhook, worker, controller, simulated
reboots), applies the repository's examples (``examples/``: a canary-then-batches policy, the
``tuning`` package with a reboot, and a training Deployment with a PodDisruptionBudget), shows the
rollout live from the NodeProfile's status, and stops everything on Ctrl-C or when the rollout
ends (unless ``--keep-running``).

``--bad-gpu`` applies ``examples/health-gate/`` instead (the same package under a node gate of the
shipped dcgm-exporter checks) and, once a node passed its gate, sets an XID on a GPU of the next
node it reads at its gate (its condition's reason, from the cluster) through the stack's GPU
exporter: that node fails its gate and the rollout halts before its next batch. It reads the
nodes' conditions; it never decides what the rollout does.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.api.keys import SEARCHABLE, NodeReason, condition_type, status_label_key
from fleetwright.cli.app import app
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from fleetwright.local.stack import LocalStack

FINAL_PHASES = ("Complete", "Halted")
# --bad-gpu: the examples it applies (under examples/), and the XID it sets (79: the GPU has fallen
# off the bus).
GATED_EXAMPLES = "health-gate"
BAD_XID = 79
NOT_STARTED = "not started"


@dataclass(frozen=True)
class NodeCondition:
    """A node's condition for the profile: its reason and message."""

    reason: str
    message: str


def node_conditions(nodes: dict[str, Any], profile: str) -> dict[str, NodeCondition | None]:
    """node -> its condition for ``profile`` (None where the profile never touched it), from
    ``kubectl get nodes -o json``."""
    found: dict[str, NodeCondition | None] = {}
    for item in nodes.get("items") or []:
        ours = [
            c
            for c in (item.get("status") or {}).get("conditions") or []
            if c.get("type") == condition_type(profile)
        ]
        name = str(item["metadata"]["name"])
        found[name] = NodeCondition(ours[0].get("reason", ""), ours[0].get("message", "")) if ours else None
    return found


def node_to_break(conditions: dict[str, NodeCondition | None]) -> str | None:
    """The node to give a bad GPU: the first, by name, at its health gate once another node passed
    its gate (so a passing gate shows first); None until then."""
    reasons = {node: c.reason for node, c in conditions.items() if c is not None}
    if NodeReason.GATE_PASSED not in reasons.values():
        return None
    return next((n for n, r in sorted(reasons.items()) if r == NodeReason.HEALTH_GATE), None)


def first_listed_gpu(node: str, gpus: int) -> int:
    """The GPU of ``node`` whose series a check's result lists first (the samples are ordered by
    their labels, so by dcgm-exporter's ``UUID``): a failure message shows its value, not "…"."""
    from fleetwright.local.gpuexporter import gpu_labels

    return min(range(gpus), key=lambda gpu: gpu_labels(node, gpu, "")["UUID"])


def by_reason(conditions: dict[str, NodeCondition | None]) -> dict[str, list[str]]:
    """reason -> its nodes, by name (``NOT_STARTED``: the nodes the profile never touched)."""
    grouped: defaultdict[str, list[str]] = defaultdict(list)
    for node, condition in sorted(conditions.items()):
        grouped[condition.reason if condition is not None else NOT_STARTED].append(node)
    return dict(sorted(grouped.items(), key=lambda item: (item[0] == NOT_STARTED, item[0])))


@dataclass
class BadGpu:
    """``--bad-gpu``: the nodes' conditions as last read, and the node given the XID (when)."""

    profile: str
    conditions: dict[str, NodeCondition | None] = field(default_factory=dict)
    node: str | None = None
    gpu: int = 0
    at: float = 0.0
    """Seconds into the rollout the XID was set."""

    def read(self, stack: LocalStack) -> None:
        """Read the nodes' conditions from the cluster (keeping the last ones if it did not answer)."""
        nodes = stack.cluster.kubectl("get", "nodes", "-o", "json", check=False)
        if nodes.returncode == 0:
            self.conditions = node_conditions(json.loads(nodes.stdout), self.profile)

    def observe(self, stack: LocalStack, elapsed: float) -> None:
        """Read the nodes' conditions; set the XID once a node to break is at its gate."""
        from fleetwright.local.gpuexporter import GPUS_PER_NODE, XID_ERRORS

        self.read(stack)
        if self.node is not None or stack.gpu_metrics is None:
            return
        node = node_to_break(self.conditions)
        if node is not None:
            gpu = first_listed_gpu(node, GPUS_PER_NODE)
            stack.gpu_metrics.exporter.set(node, XID_ERRORS, BAD_XID, gpu=gpu)
            self.node, self.gpu, self.at = node, gpu, elapsed

    @property
    def injected(self) -> str:
        return f"XID {BAD_XID} set on {self.node}'s GPU {self.gpu} at {self.at:.0f}s, at its health gate"

    def failed(self) -> bool:
        """The node given the XID failed its gate."""
        condition = self.conditions.get(self.node or "")
        return condition is not None and condition.reason == NodeReason.GATE_FAILED


def status_of(stack: LocalStack, resource: str, name: str) -> dict[str, Any]:
    """The status of a fleetwright object of the stack's cluster (empty if it cannot be read)."""
    result = stack.cluster.kubectl("get", resource, name, "-o", "json", check=False)
    if result.returncode != 0:
        return {}
    status: dict[str, Any] = json.loads(result.stdout).get("status") or {}
    return status


def _table(profile: str, status: dict[str, Any], elapsed: float, bad: BadGpu | None = None) -> Table:
    from rich.table import Table
    from rich.text import Text

    caption = bad.injected if bad is not None and bad.node is not None else None
    table = Table(
        title=f"nodeprofile/{profile}  ({elapsed:.0f}s)",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
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
    conditions = bad.conditions if bad is not None else {}
    issues = (status.get("nodeIssues") or [])[:5]
    for issue in issues:
        # The node's own reason (HealthGateFailed) is more precise than the profile's StageFailed.
        ours = conditions.get(str(issue.get("node")))
        reason = ours.reason if ours is not None else issue.get("reason", "")
        table.add_row("", f"[red]{issue.get('node')}[/]", Text(reason), Text(issue.get("message", "")))
    listed = {issue.get("node") for issue in issues}
    for node, condition in sorted(conditions.items()):
        if condition is not None and condition.reason == NodeReason.HEALTH_GATE and node not in listed:
            table.add_row("", f"[yellow]{node}[/]", Text(condition.reason), Text(condition.message))
    return table


def _watch(
    console: Console, stack: LocalStack, profile: str, within: float, bad: BadGpu | None = None
) -> dict[str, Any]:
    from fleetwright.cli.text import refreshing

    started = time.monotonic()
    status: dict[str, Any] = {}
    with refreshing(console) as show:
        while time.monotonic() - started < within:
            status = status_of(stack, "nodeprofile", profile)
            if bad is not None:
                bad.observe(stack, time.monotonic() - started)
            show(_table(profile, status, time.monotonic() - started, bad))
            if status.get("phase") in FINAL_PHASES and status.get("observedGeneration"):
                break
            stack.check_alive()
            time.sleep(1.0)
    return status


def _summary(
    console: Console, stack: LocalStack, profile: str, status: dict[str, Any], bad: BadGpu | None = None
) -> None:
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
    if bad is not None:
        for line in bad_gpu_lines(bad, profile, stack):
            console.print(line, markup=False, highlight=False)
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


def bad_gpu_lines(bad: BadGpu, profile: str, stack: LocalStack) -> list[str]:
    """What the XID did, node by node, and the commands that show it."""
    from fleetwright.workflows.ids import node_workflow_id

    if bad.node is None:
        return ["no node reached its health gate after another passed: no XID was set"]
    condition = bad.conditions.get(bad.node)
    outcome = f"{condition.reason} — {condition.message}" if condition is not None else "no condition"
    lines = [bad.injected, f"  {bad.node}: {outcome}", "  the nodes by their condition:"]
    lines += [f"    {reason}: {', '.join(nodes)}" for reason, nodes in by_reason(bad.conditions).items()]
    lines += [
        f"Inspect it (with --keep-running; in another shell: source {stack.env_path}):",
        f"  fleetwright status {profile}",
        f"  fleetwright logs {profile} {bad.node}",
        f"  Temporal UI: {stack.ui_url}/namespaces/{stack.temporal.namespace}/workflows"
        f"  (workflow {node_workflow_id(profile, bad.node)}: each measurement is an activity)",
    ]
    return lines


def _run(nodes: int, fail_canary: bool, bad_gpu: bool, keep_running: bool, within: float) -> int:
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
    examples = examples_dir() / GATED_EXAMPLES if bad_gpu else examples_dir()
    profile = example_profiles(examples)[0]
    bad = BadGpu(profile) if bad_gpu else None
    console = human_console()
    with LocalStack(options) as stack:
        console.print(f"[green]local stack[/] with {nodes} GPU nodes up in {stack.startup_seconds:.1f}s")
        console.print(f"[green]Temporal[/] {stack.temporal.address}   Web UI: [bold]{stack.ui_url}[/]")
        status: dict[str, Any] = {}
        try:
            stack.cluster.kubectl("apply", "-f", str(examples))
            console.print(f"applied {examples}/: rolling out nodeprofile/{profile}")
            status = _watch(console, stack, profile, within, bad)
            if bad is not None:
                bad.read(stack)  # the nodes' final conditions
            _summary(console, stack, profile, status, bad)
            linger(console, stack, keep_running)
        except KeyboardInterrupt:
            console.print("interrupted: stopping")
    console.print("stopped: no process left behind")
    if bad is not None:
        return 0 if status.get("phase") == "Halted" and bad.failed() else 1
    wanted = "Halted" if fail_canary else "Complete"
    return 0 if status.get("phase") == wanted else 1


def linger(console: Console, stack: LocalStack, keep_running: bool) -> None:
    """With ``--keep-running``: keep the stack up until Ctrl-C, failing if a process of it exits
    on its own."""
    if not keep_running:
        return
    console.print("still running: Ctrl-C stops everything")
    while True:
        time.sleep(1.0)
        stack.check_alive()


@app.command("demo")
def demo(  # noqa: PLR0917 - typer maps each parameter to one option
    nodes: Annotated[int, typer.Option(help="Simulated GPU nodes (in racks and zones).")] = 24,
    fail_canary: Annotated[
        bool, typer.Option(help="Make every stage fail: the canary halts the rollout.")
    ] = False,
    bad_gpu: Annotated[
        bool,
        typer.Option(
            help="Roll out under a node gate of GPU health checks (examples/health-gate/) and make a GPU "
            "of one node throw an XID at its gate: that node fails and the rollout halts."
        ),
    ] = False,
    campaign: Annotated[
        bool,
        typer.Option(
            help="Roll the change out across three local clusters (NODES each) as one Campaign "
            "(examples/campaign/): cluster-1, an approval the demo gives, then the other two at once; "
            "with --fail-canary the campaign halts before the other clusters start."
        ),
    ] = False,
    keep_running: Annotated[bool, typer.Option(help="Keep everything up after the rollout ends.")] = False,
    timeout: Annotated[float, typer.Option(help="Give up watching after this many seconds.")] = 600.0,
) -> None:
    """Run a whole rollout on a local fleet: control plane, Temporal, worker, controller, live view."""
    if bad_gpu and fail_canary:
        raise typer.BadParameter("choose one of --bad-gpu and --fail-canary", param_hint="--bad-gpu")
    if bad_gpu and nodes < 2:
        raise typer.BadParameter(
            f"--bad-gpu needs 2 nodes or more (one passes its gate first), not {nodes}", param_hint="--nodes"
        )
    if campaign:
        if bad_gpu:
            raise typer.BadParameter("choose one of --bad-gpu and --campaign", param_hint="--bad-gpu")
        from fleetwright.cli.democampaign import run_campaign

        raise typer.Exit(run_campaign(nodes, fail_canary, keep_running, timeout))
    raise typer.Exit(_run(nodes, fail_canary, bad_gpu, keep_running, timeout))
