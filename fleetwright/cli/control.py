"""The operator's acts on a rollout: ``pause``, ``resume``, ``approve``, ``abort``, ``retry-node``,
``skip-node`` and ``release``.

Pause and resume are durable intent: the ``fleetwright.io/paused`` annotation on the NodeProfile,
which the controller turns into the workflow's pause/resume signals. A re-apply that keeps the
annotation, a controller restart or a continue-as-new all keep the rollout paused, and the pause
is visible in ``kubectl get -o yaml`` and in a GitOps diff. The one-off acts go straight to the
rollout workflow: approve, retry-node, skip-node and release as Temporal *updates*, whose validators refuse
a wrong step or node with an immediate error; abort as the workflow's signal. Owns the command
surface and the answers; the rules live in the workflow's validators.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.api.keys import PAUSED_ANNOTATION
from fleetwright.cli.app import app
from fleetwright.cli.session import CliError, OutputOpt, Session, check_output, print_acted
from fleetwright.workflows.ids import node_workflow_id, rollout_workflow_id

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle
    from temporalio.workflow import UpdateMethodMultiParam

    from fleetwright.cli.reports import Acted
    from fleetwright.workflows.payloads import Progress
    from fleetwright.workflows.rollout import RolloutWorkflow

ProfileArg = Annotated[str, typer.Argument(help="The NodeProfile.")]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=1.0, help="Seconds to wait for the rollout workflow to answer.")
]


# ----- durable intent: the annotation ------------------------------------------------------------
async def _set_paused(session: Session, profile: str, paused: bool) -> Acted:
    from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
    from fleetwright.cli import reading
    from fleetwright.cli.reports import Acted
    from fleetwright.kube.annotations import annotate

    obj = await reading.profile_object(session, profile)
    annotations = obj["metadata"].get("annotations") or {}
    before = str(annotations.get(PAUSED_ANNOTATION, "")).lower() == "true"
    await asyncio.to_thread(
        annotate, session.api, PROFILE_PLURAL, profile, PAUSED_ANNOTATION, "true" if paused else None
    )
    verb = "paused" if paused else "resumed"
    already = " (it already was)" if before == paused else ""
    note = (
        "no node starts until `fleetwright resume`; nodes already running finish"
        if paused
        else "the rollout continues where it stopped"
    )
    return Acted(
        profile=profile,
        action="pause" if paused else "resume",
        via=f"annotation {PAUSED_ANNOTATION}",
        result=f"{verb} NodeProfile {profile}{already}: {note}",
    )


@app.command("pause")
def pause_command(ctx: typer.Context, profile: ProfileArg, output: OutputOpt = "table") -> None:
    """Pause a rollout (durable: sets the fleetwright.io/paused annotation on the NodeProfile)."""
    session = Session.of(ctx)
    check_output(output)
    print_acted(session.run(lambda: _set_paused(session, profile, True)), output)


@app.command("resume")
def resume_command(ctx: typer.Context, profile: ProfileArg, output: OutputOpt = "table") -> None:
    """Resume a paused rollout (removes the fleetwright.io/paused annotation)."""
    session = Session.of(ctx)
    check_output(output)
    print_acted(session.run(lambda: _set_paused(session, profile, False)), output)


# ----- one-off acts: updates and the abort signal -----------------------------------------------
async def _running_rollout(session: Session, profile: str) -> WorkflowHandle[Any, Progress]:
    """The profile's running rollout workflow, or an error saying why there is none."""
    from fleetwright.cli import reading
    from fleetwright.workflows.payloads import Progress

    client = await session.temporal()
    workflow_id = rollout_workflow_id(profile)
    description = await reading.describe(client, workflow_id)
    if description is None:
        raise CliError(
            f"no rollout workflow {workflow_id} in Temporal namespace {session.target.temporal_namespace} "
            f"at {session.target.temporal_address} (is the controller running?)"
        )
    if description.status is not None and description.status.name != "RUNNING":
        raise CliError(
            f"the rollout workflow {workflow_id} is {description.status.name.lower()}, not running"
        )
    return client.get_workflow_handle(workflow_id, result_type=Progress)


class Update(StrEnum):
    """The rollout workflow's updates, by the command that sends each."""

    APPROVE = "approve"
    RETRY_NODE = "retry-node"
    SKIP_NODE = "skip-node"
    RELEASE = "release"


def _method(update: Update) -> UpdateMethodMultiParam[[RolloutWorkflow, str], str]:
    """The workflow's update method (the update's name and types come with it)."""
    from fleetwright.workflows.rollout import RolloutWorkflow

    methods: dict[Update, UpdateMethodMultiParam[[RolloutWorkflow, str], str]] = {
        Update.APPROVE: RolloutWorkflow.approve,
        Update.RETRY_NODE: RolloutWorkflow.retry_node,
        Update.SKIP_NODE: RolloutWorkflow.skip_node,
        Update.RELEASE: RolloutWorkflow.release_node,
    }
    return methods[update]


async def _update(session: Session, profile: str, update: Update, arg: str, *, seconds: float) -> Acted:
    from temporalio.service import RPCError, RPCStatusCode

    from fleetwright.cli.reports import Acted

    handle = await _running_rollout(session, profile)
    name = update.name.lower()  # the update's name: the method's
    try:
        answer = await handle.execute_update(_method(update), arg, rpc_timeout=timedelta(seconds=seconds))
    except RPCError as error:
        if error.status == RPCStatusCode.DEADLINE_EXCEEDED:
            raise CliError(
                f"the rollout workflow {handle.id} did not answer the {name} update within {seconds:g}s "
                "(is a fleetwright worker running?)"
            ) from error
        raise
    return Acted(profile=profile, action=update.value, via=f"update {name}", result=answer)


def _send(ctx: typer.Context, update: Update, *, profile: str, arg: str, output: str, timeout: float) -> None:
    """The body of every update command."""
    session = Session.of(ctx)
    check_output(output)
    if update is Update.APPROVE and arg.startswith(GATE_PREFIX):
        node = arg.removeprefix(GATE_PREFIX)
        print_acted(session.run(lambda: _approve_gate(session, profile, node, seconds=timeout)), output)
        return
    print_acted(session.run(lambda: _update(session, profile, update, arg, seconds=timeout)), output)


GATE_PREFIX = "gate/"
"""``approve P gate/<node>``: pass the node's Inconclusive health gate (its node workflow's update)."""


async def _approve_gate(session: Session, profile: str, node: str, *, seconds: float) -> Acted:
    """The node workflow's ``approve_gate`` update; refused unless the node waits at an
    Inconclusive gate."""
    from temporalio.service import RPCError, RPCStatusCode

    from fleetwright.cli import reading
    from fleetwright.cli.reports import Acted
    from fleetwright.workflows.node import NodeWorkflow

    client = await session.temporal()
    workflow_id = node_workflow_id(profile, node)
    description = await reading.describe(client, workflow_id)
    if description is None or (description.status is not None and description.status.name != "RUNNING"):
        raise CliError(
            f"{node} has no running node workflow for {profile} ({workflow_id}): no gate to approve"
        )
    handle = client.get_workflow_handle(workflow_id)
    try:
        answer = await handle.execute_update(
            NodeWorkflow.approve_gate, rpc_timeout=timedelta(seconds=seconds)
        )
    except RPCError as error:
        if error.status == RPCStatusCode.DEADLINE_EXCEEDED:
            raise CliError(
                f"the node workflow {workflow_id} did not answer within {seconds:g}s "
                "(is a fleetwright worker running?)"
            ) from error
        raise
    return Acted(profile=profile, action="approve", via="update approve_gate", result=answer)


@app.command(Update.APPROVE.value)
def approve_command(
    ctx: typer.Context,
    profile: ProfileArg,
    step: Annotated[
        str,
        typer.Argument(
            help="The approval step, `<scope>/<step>` (e.g. rollout/gate; also a soak or batches step "
            "whose fleet gate is Inconclusive or MonitoringUnavailable), or `gate/<node>` for a node "
            "held at its health gate (Inconclusive or MonitoringUnavailable)."
        ),
    ],
    output: OutputOpt = "table",
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Approve an approval step of the rollout; a wrong step is refused naming the known ones."""
    _send(ctx, Update.APPROVE, profile=profile, arg=step, output=output, timeout=timeout)


@app.command(Update.RETRY_NODE.value)
def retry_node_command(
    ctx: typer.Context,
    profile: ProfileArg,
    node: Annotated[str, typer.Argument(help="A node that failed in this rollout.")],
    output: OutputOpt = "table",
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Run a failed node again (new stage Jobs); refused for a node that has not failed."""
    _send(ctx, Update.RETRY_NODE, profile=profile, arg=node, output=output, timeout=timeout)


@app.command(Update.SKIP_NODE.value)
def skip_node_command(
    ctx: typer.Context,
    profile: ProfileArg,
    node: Annotated[str, typer.Argument(help="A node to leave out of this rollout's target.")],
    output: OutputOpt = "table",
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Leave a node out (a failed one no longer holds the rollout); refused while it is updating."""
    _send(ctx, Update.SKIP_NODE, profile=profile, arg=node, output=output, timeout=timeout)


@app.command(Update.RELEASE.value)
def release_command(
    ctx: typer.Context,
    profile: ProfileArg,
    node: Annotated[
        str, typer.Argument(help="A node this rollout failed on, e.g. one held as hardware suspect.")
    ],
    output: OutputOpt = "table",
    timeout: TimeoutOpt = 30.0,
) -> None:
    """Put a failed node back into service: fleetwright lifts its cordon and shows it Released,
    though its health gate did not pass (recorded in the rollout's history); refused unless the
    rollout failed on it."""
    _send(ctx, Update.RELEASE, profile=profile, arg=node, output=output, timeout=timeout)


async def _abort(session: Session, profile: str) -> Acted:
    from fleetwright.cli.reports import Acted
    from fleetwright.workflows.rollout import RolloutWorkflow

    handle = await _running_rollout(session, profile)
    await handle.signal(RolloutWorkflow.abort)
    return Acted(
        profile=profile,
        action="abort",
        via="signal abort",
        result=f"aborting the rollout of {profile}: no node starts again; running nodes finish their "
        "current stage and are handed back uncordoned",
    )


@app.command("abort")
def abort_command(
    ctx: typer.Context,
    profile: ProfileArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    output: OutputOpt = "table",
) -> None:
    """Abort the rollout: nothing new starts, running nodes finish, the workflow ends Aborted and
    stays so for this generation (a spec edit or an explicit resume starts it again); asks first
    unless --yes."""
    session = Session.of(ctx)
    check_output(output)
    question = f"Abort the rollout of {profile}? Only a spec edit or a resume starts it again."
    if not yes and not typer.confirm(question, err=True):
        raise typer.Exit(1)
    print_acted(session.run(lambda: _abort(session, profile)), output)
