"""``fleetwright campaign``: a campaign seen and operated as one thing: ``status`` (per cluster:
phase, counts, what it waits for, an unreachable cluster named), ``pause`` and ``resume`` (durable:
the ``fleetwright.io/paused`` annotation on the Campaign, which the controller turns into the
workflow's signals), ``approve`` (the gate after a stage) and ``abort``. Owns the command surface;
the rules live in the campaign workflow and its validator."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.api.keys import PAUSED_ANNOTATION
from fleetwright.cli.app import CommandGroup, app
from fleetwright.cli.session import CliError, OutputOpt, Session, check_output, emit, print_acted
from fleetwright.workflows.ids import campaign_workflow_id

if TYPE_CHECKING:
    from rich.console import Console

    from fleetwright.cli.reports import Acted, CampaignView

campaign_app = typer.Typer(cls=CommandGroup, help="Campaigns: one change across several clusters.")
app.add_typer(campaign_app, name="campaign")

NameArg = Annotated[str, typer.Argument(help="The Campaign.")]


async def _view(session: Session, name: str) -> CampaignView:
    from fleetwright.cli import reading
    from fleetwright.cli.reports import CampaignView
    from fleetwright.controller.campaigns import unreachable_clusters
    from fleetwright.workflows.payloads import CampaignProgress

    client = await session.temporal()
    workflow_id = campaign_workflow_id(name)
    description = await reading.describe(client, workflow_id)
    if description is None:
        raise CliError(
            f"no campaign workflow {workflow_id} (is the controller running, and the Campaign applied?)"
        )
    progress = await description.memo_value("progress", None, type_hint=CampaignProgress)
    if progress is None:
        raise CliError(f"the campaign workflow {workflow_id} has not published its progress yet")
    return CampaignView(progress=progress, unreachable=await unreachable_clusters(client, progress))


def _table(view: CampaignView, console: Console) -> None:
    from rich.table import Table

    progress = view.progress
    console.print(f"campaign {progress.campaign}: {progress.phase}: {progress.message}", highlight=False)
    table = Table("CLUSTER", "PHASE", "COMPLETE", "FAILED", "ROLLOUT", "MESSAGE", box=None)
    for cluster, report in progress.clusters.items():
        unreachable = view.unreachable.get(cluster)
        table.add_row(
            cluster,
            "Unreachable" if unreachable else report.phase,
            f"{report.updated}/{report.targeted}",
            str(report.failed),
            progress.rollouts.get(cluster, "-"),
            unreachable or report.message,
        )
    console.print(table)


@campaign_app.command("status")
def status_command(ctx: typer.Context, name: NameArg, output: OutputOpt = "table") -> None:
    """Each member cluster's rollout: phase, nodes complete and failed, what it waits for."""
    session = Session.of(ctx)
    shown = check_output(output)
    view = session.run(lambda: _view(session, name))
    emit(view, shown, lambda console: _table(view, console))


async def _set_paused(session: Session, name: str, paused: bool) -> Acted:
    from fleetwright.api.campaign import PLURAL
    from fleetwright.cli.reports import Acted
    from fleetwright.kube.annotations import annotate

    await asyncio.to_thread(
        annotate, session.api, PLURAL, name, PAUSED_ANNOTATION, "true" if paused else None
    )
    note = "no new node starts in any cluster" if paused else "every cluster continues where it stopped"
    return Acted(
        profile=name,
        action="pause" if paused else "resume",
        via=f"annotation {PAUSED_ANNOTATION}",
        result=f"{'paused' if paused else 'resumed'} Campaign {name}: {note}",
    )


@campaign_app.command("pause")
def pause_command(ctx: typer.Context, name: NameArg, output: OutputOpt = "table") -> None:
    """Pause every cluster of a campaign (durable: the fleetwright.io/paused annotation)."""
    _pause_or_resume(ctx, name, output, paused=True)


@campaign_app.command("resume")
def resume_command(ctx: typer.Context, name: NameArg, output: OutputOpt = "table") -> None:
    """Resume a paused campaign, or one its failure rule halted (it counts failed nodes again)."""
    _pause_or_resume(ctx, name, output, paused=False)


def _pause_or_resume(ctx: typer.Context, name: str, output: str, *, paused: bool) -> None:
    _act(ctx, output, lambda session: _set_paused(session, name, paused))


def _act(ctx: typer.Context, output: str, act: Callable[[Session], Coroutine[Any, Any, Acted]]) -> None:
    """Run one act on the campaign and print what it did."""
    session = Session.of(ctx)
    check_output(output)  # refused before anything is done
    print_acted(session.run(lambda: act(session)), output)


async def _approve(session: Session, name: str, stage: str) -> Acted:
    from temporalio.client import WorkflowUpdateFailedError

    from fleetwright.cli.reports import Acted
    from fleetwright.workflows.campaign import CampaignWorkflow

    client = await session.temporal()
    handle = client.get_workflow_handle(campaign_workflow_id(name))
    try:
        answer = await handle.execute_update(
            CampaignWorkflow.approve, stage, rpc_timeout=timedelta(seconds=30)
        )
    except WorkflowUpdateFailedError as error:
        raise CliError(f"approve {stage}: {error.cause}") from None
    return Acted(profile=name, action="approve", via="update approve", result=answer)


@campaign_app.command("approve")
def approve_command(
    ctx: typer.Context,
    name: NameArg,
    stage: Annotated[str, typer.Argument(help="The stage whose gate to pass.")],
    output: OutputOpt = "table",
) -> None:
    """Let the stage after STAGE start (STAGE has `approval: true`)."""
    _act(ctx, output, lambda session: _approve(session, name, stage))


async def _abort(session: Session, name: str) -> Acted:
    from fleetwright.cli.reports import Acted
    from fleetwright.workflows.campaign import CampaignWorkflow

    client = await session.temporal()
    await client.get_workflow_handle(campaign_workflow_id(name)).signal(CampaignWorkflow.abort)
    return Acted(
        profile=name,
        action="abort",
        via="signal abort",
        result=f"aborting Campaign {name}: every cluster's rollout is aborted (running nodes finish)",
    )


@campaign_app.command("abort")
def abort_command(ctx: typer.Context, name: NameArg, output: OutputOpt = "table") -> None:
    """Abort a campaign: every cluster's rollout stops starting nodes; the abort holds until the
    Campaign's spec changes."""
    _act(ctx, output, lambda session: _abort(session, name))
