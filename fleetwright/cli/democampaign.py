"""``fleetwright demo --campaign``: the example change across three local clusters as one Campaign.

Brings the local stack up with three control planes (``cluster up --clusters 3``: one Temporal,
one worker and controller, every cluster registered for campaigns), applies
``examples/campaign/`` (a DeploymentPolicy and a Campaign: cluster-1, an approval, then cluster-2
and cluster-3 at once), shows the campaign live from its status, gives the approval once the
stage that asks for it is complete (as ``fleetwright campaign approve`` does, through the
workflow's update), prints the fleet gate's measurements (from the campaign's history), and stops
everything when the campaign ends (unless ``--keep-running``).
It reads the Campaign's status; it never decides what the campaign does.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetwright.cli.demo import linger, status_of

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from fleetwright.local.stack import LocalStack

CAMPAIGN_EXAMPLES = "campaign"
CAMPAIGN_CLUSTERS = 3
FINAL_PHASES = ("Complete", "Halted", "RolledBack")


@dataclass
class Approvals:
    """The stages of the example Campaign that ask for an approval, and those the demo gave."""

    name: str
    stages: dict[str, list[str]]
    """stage -> its clusters, for each stage with ``approval: true``."""
    given: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, examples: Path) -> Approvals:
        """The (single) Campaign of ``examples``."""
        from fleetwright.api.campaign import KIND, Campaign
        from fleetwright.local.stack import example_documents

        campaign = Campaign.model_validate(example_documents(examples, KIND)[0])
        stages = {s.name: list(s.clusters) for s in campaign.spec.stages if s.approval}
        return cls(campaign.metadata.name or "", stages)

    def due(self, status: dict[str, Any]) -> str | None:
        """The stage to approve now: the campaign waits at its gate and its clusters are complete."""
        if status.get("phase") != "Waiting":
            return None
        stage = str(status.get("stage") or "")
        if stage not in self.stages or stage in self.given:
            return None
        phases = {c.get("name"): c.get("phase") for c in status.get("clusters") or []}
        return stage if all(phases.get(c) == "Complete" for c in self.stages[stage]) else None


async def _approve(stack: LocalStack, name: str, stage: str) -> str:
    from fleetwright.process.temporalclient import connect
    from fleetwright.workflows.campaign import CampaignWorkflow
    from fleetwright.workflows.ids import campaign_workflow_id

    client = await connect(stack.temporal.address, stack.temporal.namespace)
    handle = client.get_workflow_handle(campaign_workflow_id(name))
    return await handle.execute_update(CampaignWorkflow.approve, stage)


async def _gate_measurements(stack: LocalStack, name: str) -> list[str]:
    """Each fleet-gate measurement the campaign took, from its history: ``cluster check phase value``."""
    from temporalio.api.enums.v1 import EventType

    from fleetwright.activities.payloads import NAMES, ChangedNodesMeasureRequest
    from fleetwright.planner.health.analysis import Measurement
    from fleetwright.process.temporalclient import connect
    from fleetwright.workflows.ids import campaign_workflow_id

    client = await connect(stack.temporal.address, stack.temporal.namespace)
    history = await client.get_workflow_handle(campaign_workflow_id(name)).fetch_history()
    decode = client.data_converter.decode
    asked: dict[int, ChangedNodesMeasureRequest] = {}
    lines = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled = event.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name == NAMES.MEASURE_CHANGED:
                [asked[event.event_id]] = await decode(scheduled.input.payloads, [ChangedNodesMeasureRequest])
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            request = asked.get(completed.scheduled_event_id)
            if request is not None:
                [measured] = await decode(completed.result.payloads, [Measurement])
                cluster = request.profile.removeprefix(f"{name}-")
                lines.append(f"{cluster} {measured.check} {measured.phase.value} {measured.value}")
    return lines


def _table(name: str, status: dict[str, Any], elapsed: float, approved: list[str]) -> Table:
    from rich.table import Table
    from rich.text import Text

    caption = f"approved after stage {', '.join(approved)}" if approved else None
    title = f"campaign/{name}  {status.get('phase', 'Pending')}, stage {status.get('stage') or '-'}"
    table = Table(title=f"{title}  ({elapsed:.0f}s)", title_justify="left", caption=caption)
    for column in ("cluster", "phase", "complete", "failed", "message"):
        table.add_column(column, no_wrap=column != "message")
    for cluster in status.get("clusters") or []:
        table.add_row(
            str(cluster.get("name")),
            str(cluster.get("phase")),
            f"{cluster.get('nodesComplete', 0)}/{cluster.get('nodesTargeted', 0)}",
            str(cluster.get("nodesFailed", 0)),
            Text(str(cluster.get("message", ""))),
        )
    return table


def _watch(console: Console, stack: LocalStack, approvals: Approvals, within: float) -> dict[str, Any]:
    from fleetwright.cli.text import refreshing

    started = time.monotonic()
    status: dict[str, Any] = {}
    with refreshing(console) as show:
        while time.monotonic() - started < within:
            status = status_of(stack, "campaign", approvals.name)
            stage = approvals.due(status)
            if stage is not None:
                asyncio.run(_approve(stack, approvals.name, stage))
                approvals.given.append(stage)
            show(_table(approvals.name, status, time.monotonic() - started, approvals.given))
            if status.get("phase") in FINAL_PHASES:
                break
            stack.check_alive()
            time.sleep(1.0)
    return status


def _summary(console: Console, stack: LocalStack, name: str, status: dict[str, Any]) -> None:
    from fleetwright.workflows.ids import campaign_workflow_id

    phase = status.get("phase", "unknown")
    colour = "green" if phase == "Complete" else "red"
    console.print(f"campaign [{colour}]{phase}[/]")
    for line in asyncio.run(_gate_measurements(stack, name)):
        console.print(f"  fleet gate: {line}", markup=False, highlight=False)
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("message"):
            console.print(
                f"  {condition['type']}: {condition.get('reason')} — {condition.get('message', '')}",
                markup=False,
            )
    hints = [
        f"Look around (with --keep-running; in another shell: source {stack.env_path}):",
        f"  export KUBECONFIG={stack.cluster.kubeconfig}",
        f"  fleetwright campaign status {name}",
        f"  kubectl get campaign {name} -o yaml",
        f"  Temporal UI: {stack.ui_url}/namespaces/{stack.temporal.namespace}/workflows"
        f"  (workflow {campaign_workflow_id(name)}: its children are the clusters' rollouts)",
    ]
    for line in hints:
        console.print(line, markup=False, highlight=False)


def run_campaign(nodes: int, fail_canary: bool, keep_running: bool, within: float) -> int:
    """The whole demo; its exit code (0: the campaign ended as shown: Complete, or Halted with a
    failing canary)."""
    from fleetwright.cli.text import human_console
    from fleetwright.local.controlplane import ClusterOptions
    from fleetwright.local.nodes import OUTCOME_LABEL
    from fleetwright.local.stack import LOCAL_ENGINE, LocalStack, StackOptions, examples_dir

    engine = LOCAL_ENGINE
    if fail_canary:
        engine = engine.model_copy(update={"stage_pod_labels": {OUTCOME_LABEL: "fail"}})
    options = StackOptions(
        cluster=ClusterOptions(nodes=nodes, scheduler=True), engine=engine, clusters=CAMPAIGN_CLUSTERS
    )
    examples = examples_dir() / CAMPAIGN_EXAMPLES
    approvals = Approvals.of(examples)
    console = human_console()
    status: dict[str, Any] = {}
    with LocalStack(options) as stack:
        console.print(
            f"[green]local stack[/] with {CAMPAIGN_CLUSTERS} clusters of {nodes} GPU nodes up in "
            f"{stack.startup_seconds:.1f}s"
        )
        console.print(f"[green]Temporal[/] {stack.temporal.address}   Web UI: [bold]{stack.ui_url}[/]")
        try:
            stack.cluster.kubectl("apply", "-f", str(examples))
            console.print(f"applied {examples}/: rolling out campaign/{approvals.name}")
            status = _watch(console, stack, approvals, within)
            _summary(console, stack, approvals.name, status)
            linger(console, stack, keep_running)
        except KeyboardInterrupt:
            console.print("interrupted: stopping")
    console.print("stopped: no process left behind")
    wanted = "Halted" if fail_canary else "Complete"
    return 0 if status.get("phase") == wanted else 1
