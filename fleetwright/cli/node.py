"""``fleetwright node reset NODE --profile P``: forget what a profile recorded on a node, so the
rollout re-evaluates the node from scratch (the next pass re-runs the profile's packages there).

It deletes the profile's finished stage Jobs on the node (Jobs are named per pass now, but a
workflow started before that keeps fixed names and would adopt a kept Job as already done, so an
interrupt would never reboot), removes the profile's state
annotation (``fleetwright.io/state.<profile>``) and status label, marks the profile's node
condition ``Unknown``/``Reset``, and nudges the rollout workflow to re-observe the fleet. It
refuses while that profile's node workflow is running on the node (the workflow would write the
state right back) unless ``--force``. It never touches the cordon, other profiles' keys, or
anything on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.api.keys import NodeReason, condition_type, state_key, status_label_key
from fleetwright.cli.app import CommandGroup, app
from fleetwright.cli.session import (
    CliError,
    NamespaceOpt,
    OutputOpt,
    Session,
    check_output,
    emit,
)
from fleetwright.stagejob.render import PACKAGE_NAMESPACE
from fleetwright.workflows.ids import node_workflow_id, rollout_workflow_id

if TYPE_CHECKING:
    from fleetwright.cli.reports import NodeReset

node_app = typer.Typer(cls=CommandGroup, help="Act on one node's fleetwright records.", no_args_is_help=True)
app.add_typer(node_app, name="node")


async def reset(session: Session, node: str, profile: str, *, force: bool, namespace: str) -> NodeReset:
    from temporalio.service import RPCError

    from fleetwright.cli import reading
    from fleetwright.cli.reports import NodeReset
    from fleetwright.workflows.rollout import RolloutWorkflow

    obj = await reading.node_object(session, node)
    client = await session.temporal()
    workflow_id = node_workflow_id(profile, node)
    running = await reading.describe(client, workflow_id)
    if running is not None and running.status is not None and running.status.name == "RUNNING" and not force:
        raise CliError(
            f"refusing: node workflow {workflow_id} is running (it would write the state right back); "
            "wait for it, abort the rollout, or pass --force"
        )
    # The Jobs go first: a pass that starts the node before they are gone would adopt them.
    cleared = [f"job/{name}" for name in await _delete_finished_jobs(session, namespace, profile, node)]
    cleared += await _clear_records(session, obj, profile)
    nudged = False
    with contextlib.suppress(RPCError):  # no rollout running: the next one observes the node anyway
        await client.get_workflow_handle(rollout_workflow_id(profile)).signal(RolloutWorkflow.nodes_changed)
        nudged = True
    if not cleared:
        result = f"nothing recorded by NodeProfile {profile} on node {node}; nothing to reset"
    else:
        result = f"reset node {node} for NodeProfile {profile}: removed {', '.join(cleared)}" + (
            "; the rollout re-observes the fleet now" if nudged else "; no rollout workflow is running"
        )
    return NodeReset(node=node, profile=profile, cleared=cleared, rollout_nudged=nudged, result=result)


async def _delete_finished_jobs(session: Session, namespace: str, profile: str, node: str) -> list[str]:
    """A running Job (only with --force) is left to finish."""
    from fleetwright.kube.stagelogs import delete_job, stage_jobs

    jobs = await asyncio.to_thread(stage_jobs, session.api, namespace, profile, node)
    deleted = []
    for job in jobs:
        if job.finished is not None and await asyncio.to_thread(delete_job, session.api, namespace, job.name):
            deleted.append(job.name)
    return deleted


async def _clear_records(session: Session, obj: dict[str, Any], profile: str) -> list[str]:
    from fleetwright.kube import nodestatus

    node = obj["metadata"]["name"]
    annotation, label_key = state_key(profile), status_label_key(profile)
    cleared = [k for k in (annotation,) if k in (obj["metadata"].get("annotations") or {})]
    cleared += [k for k in (label_key,) if k in (obj["metadata"].get("labels") or {})]
    if not cleared:
        return []
    await asyncio.to_thread(
        nodestatus.merge_metadata, session.api, node, annotations={annotation: None}, labels={label_key: None}
    )
    message = "recorded state cleared by `fleetwright node reset`; the rollout re-evaluates this node"
    condition = nodestatus.NodeStatusCondition(condition_type(profile), "Unknown", NodeReason.RESET, message)
    await asyncio.to_thread(nodestatus.set_condition, session.api, node, condition)
    return cleared


@node_app.command("reset")
def reset_command(
    ctx: typer.Context,
    node: Annotated[str, typer.Argument(help="The node.")],
    *,
    profile: Annotated[str, typer.Option("--profile", "-p", help="The NodeProfile whose records go.")],
    force: Annotated[
        bool, typer.Option("--force", help="Reset even while the profile's node workflow is running.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    namespace: NamespaceOpt = PACKAGE_NAMESPACE,
    output: OutputOpt = "table",
) -> None:
    """Forget a profile's recorded state on a node so the rollout re-runs its packages there."""
    session = Session.of(ctx)
    fmt = check_output(output)
    if not yes and not typer.confirm(
        f"Reset node {node} for {profile}? The rollout will re-run the profile's packages on it.", err=True
    ):
        raise typer.Exit(1)
    done = session.run(lambda: reset(session, node, profile, force=force, namespace=namespace))
    emit(done, fmt, lambda console: console.print(done.result, highlight=False))
