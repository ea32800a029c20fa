"""``fleetwright history NODE``: what fleetwright ran on a node, when, and with what result.

Three sources, each authoritative for its part: the node workflows in Temporal (found by the
``FleetwrightNode`` search attribute: one per profile and target, with start, close and result),
the stage Jobs on the node (each stage, when it ran, Complete or Failed) and what every profile
recorded on the Node (the ``fleetwright.io/state.<profile>`` annotation and the profile's node
condition). Owns gathering and printing; it writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.api.keys import STATE_PREFIX, condition_type
from fleetwright.cli.app import app
from fleetwright.cli.session import NamespaceOpt, OutputOpt, Session, check_output, emit
from fleetwright.errors import InvalidSpecError
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

if TYPE_CHECKING:
    from rich.console import Console
    from temporalio.client import Client, WorkflowExecution

    from fleetwright.cli.reports import NodeHistory, Recorded, Run
    from fleetwright.planner.node.state import PackageRecord

MAX_RUNS = 100


def describe_record(record: PackageRecord) -> str:
    text = record.version or "not installed"
    pending = record.pending
    if pending is not None:
        done = ", ".join(s.value for s in pending.done) or "none"
        text += f"; changing to {pending.version} (stages done: {done})"
        if pending.failed:
            text += f"; failed: {pending.failed}"
    return text


def recorded(node: Mapping[str, Any]) -> list[Recorded]:
    from fleetwright.cli.reports import Recorded
    from fleetwright.planner.node.state import parse_annotation

    annotations: Mapping[str, str] = node["metadata"].get("annotations") or {}
    conditions = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
    out = []
    for key, value in sorted(annotations.items()):
        if not key.startswith(STATE_PREFIX):
            continue
        try:
            state = parse_annotation(key, value)
        except InvalidSpecError as error:
            out.append(Recorded(profile=key.removeprefix(STATE_PREFIX), condition=f"unreadable: {error}"))
            continue
        cond = conditions.get(condition_type(state.profile)) or {}
        shown = f"{cond.get('status')} {cond.get('reason')}: {cond.get('message')}" if cond else ""
        packages = {name: describe_record(r) for name, r in state.packages.items()}
        out.append(Recorded(profile=state.profile, packages=packages, condition=shown))
    return out


async def _result(client: Client, execution: WorkflowExecution) -> str:
    from temporalio.client import WorkflowExecutionStatus

    from fleetwright.workflows.payloads import NodeResult

    if execution.status is not WorkflowExecutionStatus.COMPLETED:
        return ""
    handle = client.get_workflow_handle(execution.id, run_id=execution.run_id, result_type=NodeResult)
    result = await handle.result()
    return f"{result.status.value}: {result.message}"


async def runs(client: Client, node: str) -> list[Run]:
    from fleetwright.cli.reports import Run
    from fleetwright.workflows import search as sa

    out = []
    query = f'{sa.NODE.name} = "{node}"'
    async for execution in client.list_workflows(query, limit=MAX_RUNS):
        attrs = execution.typed_search_attributes
        out.append(
            Run(
                workflow_id=execution.id,
                run_id=execution.run_id,
                profile=attrs.get(sa.PROFILE) or "",
                status=execution.status.name if execution.status else "UNKNOWN",
                phase=attrs.get(sa.PHASE) or "",
                packages=list(attrs.get(sa.PACKAGES) or []),
                started=execution.start_time,
                closed=execution.close_time,
                result=await _result(client, execution),
            )
        )
    return sorted(out, key=lambda r: (r.started is None, r.started or datetime.min))


async def read_history(session: Session, node: str, namespace: str) -> NodeHistory:
    from fleetwright.cli import reading
    from fleetwright.cli.reports import NodeHistory, StageRun
    from fleetwright.kube.stagelogs import stage_jobs

    obj = await reading.node_object(session, node)
    jobs = await asyncio.to_thread(stage_jobs, session.api, namespace, None, node)
    stages = [
        StageRun(
            profile=j.profile,
            package=j.package,
            stage=j.stage,
            job=j.name,
            started=j.created,
            finished=j.finished_at,
            result=j.finished or ("Running" if j.active else "Pending"),
        )
        for j in jobs
    ]
    return NodeHistory(
        node=node, recorded=recorded(obj), runs=await runs(await session.temporal(), node), stages=stages
    )


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "-"


def render(history: NodeHistory, console: Console) -> None:
    from rich.table import Table

    console.print(f"[bold]Node {history.node}[/]", highlight=False)
    table = Table(title="Recorded on the node", title_justify="left")
    for column in ("profile", "packages", "condition"):
        table.add_column(column)
    for entry in history.recorded:
        packages = "; ".join(f"{k} {v}" for k, v in entry.packages.items()) or "-"
        table.add_row(entry.profile, packages, entry.condition or "-")
    console.print(table if history.recorded else "nothing recorded by fleetwright")
    table = Table(title="Node workflows (Temporal)", title_justify="left")
    for column in ("started", "closed", "profile", "status", "packages", "result", "workflow"):
        table.add_column(column)
    for run in history.runs:
        table.add_row(
            _when(run.started),
            _when(run.closed),
            run.profile,
            run.status,
            ", ".join(run.packages),
            run.result or run.phase,
            run.workflow_id,
        )
    console.print(table if history.runs else "no node workflows found")
    table = Table(title="Stage Jobs", title_justify="left")
    for column in ("started", "finished", "profile", "stage", "package", "result", "job"):
        table.add_column(column)
    for stage in history.stages:
        table.add_row(
            _when(stage.started),
            _when(stage.finished),
            stage.profile,
            stage.stage,
            stage.package,
            stage.result,
            stage.job,
        )
    console.print(table if history.stages else "no stage Jobs")


@app.command("history")
def history_command(
    ctx: typer.Context,
    node: Annotated[str, typer.Argument(help="The node.")],
    namespace: NamespaceOpt = PACKAGE_NAMESPACE,
    output: OutputOpt = "table",
) -> None:
    """What ran on a node, when, with what result: node workflows, stage Jobs, recorded state."""
    session = Session.of(ctx)
    fmt = check_output(output)
    history = session.run(lambda: read_history(session, node, namespace))
    emit(history, fmt, lambda console: render(history, console))
