"""``fleetwright status [PROFILE]``: every NodeProfile's mirrored status, or one rollout as a live
tree (step and batch, each targeted node's state and stage, blocked reasons naming the pod and the
PodDisruptionBudget, failures, ETA). ``--watch`` refreshes it until the rollout ends.

Owns reading the sources (``fleetwright.cli.reading``; stage Jobs for what runs now) and the
refresh loop; the view itself is the pure ``fleetwright.cli.statusview``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from fleetwright.cli.app import app
from fleetwright.cli.session import NamespaceOpt, Output, OutputOpt, Session, check_output, emit
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

if TYPE_CHECKING:
    from fleetwright.api.nodeprofile import NodeProfile
    from fleetwright.cli.statusview import RolloutView
    from fleetwright.workflows.payloads import Progress


async def read_view(
    session: Session, name: str, now: datetime, namespace: str = PACKAGE_NAMESPACE
) -> RolloutView:
    from fleetwright.cli import reading
    from fleetwright.cli.statusview import rollout_view
    from fleetwright.kube.stagelogs import stage_jobs
    from fleetwright.workflows.ids import rollout_workflow_id

    profile = reading.parse_profile(await reading.profile_object(session, name))
    nodes = await reading.targeted_nodes(session, profile)
    jobs = await asyncio.to_thread(stage_jobs, session.api, namespace, name)
    running = {j.node: f"{j.stage} {j.package}" for j in jobs if j.finished is None and j.active}
    workflow_id = rollout_workflow_id(name)
    progress = await reading.progress_of(await reading.describe(await session.temporal(), workflow_id))
    eta, note = await _eta(session, profile, progress, nodes, now)
    return rollout_view(profile, progress, nodes, running, workflow_id=workflow_id, eta=eta, eta_note=note)


async def _eta(
    session: Session,
    profile: NodeProfile,
    progress: Progress | None,
    nodes: list[dict[str, object]],
    now: datetime,
) -> tuple[datetime | None, str]:
    """The planner's estimate for the nodes still needing work (the same engine as ``plan``)."""
    from fleetwright.cli import reading
    from fleetwright.cli.plan import observe
    from fleetwright.cli.statusview import TERMINAL_PHASES
    from fleetwright.errors import InvalidSpecError
    from fleetwright.planner import convert
    from fleetwright.planner.rollout.preview import preview
    from fleetwright.planner.rollout.rollback import recorded_previous, rollback_spec

    if progress is None or progress.phase in TERMINAL_PHASES or progress.paused:
        return None, _no_eta(progress)
    policy = await reading.policy_of(session, profile)
    if policy is None:
        return None, "unknown: the DeploymentPolicy is missing"
    try:
        observed = observe({"kind": "NodeList", "items": nodes}, profile, "the cluster")
        spec = convert.rollout_spec(profile, policy)
        of = progress.rolled_back
        if of is not None:
            spec = rollback_spec(spec, of, recorded_previous(spec, observed, of))
        plan = preview(spec, observed, now)
    except (ValueError, InvalidSpecError) as error:
        return None, f"unknown: {error}"
    if plan.eta is None:
        return None, "unknown: no node can start now"
    if of is not None:
        return max(plan.eta, now), "planner estimate for the nodes still to return"
    return max(plan.eta, now), "planner estimate for the remaining nodes, gates included"


def _no_eta(progress: Progress | None) -> str:
    if progress is None:
        return ""
    return "none while paused" if progress.paused else f"none: the rollout is {progress.phase}"


@app.command("status")
def status_command(
    ctx: typer.Context,
    profile: Annotated[str | None, typer.Argument(help="A NodeProfile; all profiles when omitted.")] = None,
    *,
    output: OutputOpt = "table",
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Refresh until the rollout completes, halts or is aborted.")
    ] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between refreshes.")] = 2.0,
    namespace: NamespaceOpt = PACKAGE_NAMESPACE,
) -> None:
    """A rollout as a live tree: step, batch, per-node stage, blocked reasons, failures, ETA."""
    session = Session.of(ctx)
    fmt = check_output(output)
    if profile is None:
        from fleetwright.api.keys import PAUSED_ANNOTATION
        from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
        from fleetwright.cli.statusview import profile_lines, render_profiles
        from fleetwright.kube.resources import list_objects

        objects = session.run(lambda: asyncio.to_thread(list_objects, session.api, PROFILE_PLURAL))
        lines = profile_lines(objects, PAUSED_ANNOTATION)
        emit(lines, fmt, lambda console: render_profiles(lines, console))
        return
    name = profile
    if not watch:
        from fleetwright.cli.statusview import render

        view, now = _snapshot(session, name, namespace)
        emit(view, fmt, lambda console: render(view, console, now))
        return
    _watch(session, name, fmt, interval, namespace)


def _snapshot(session: Session, name: str, namespace: str) -> tuple[RolloutView, datetime]:
    now = datetime.now(UTC)  # the CLI may read the clock; the view never does
    return session.run(lambda: read_view(session, name, now, namespace)), now


def _watch(session: Session, name: str, fmt: Output, interval: float, namespace: str) -> None:
    from fleetwright.cli.statusview import TERMINAL_PHASES, tree
    from fleetwright.cli.text import human_console, refreshing

    console = human_console()
    if fmt is not Output.TABLE:
        while True:
            view, _ = _snapshot(session, name, namespace)
            emit(view, fmt, lambda _: None)
            if view.phase in TERMINAL_PHASES:
                return
            time.sleep(interval)
    with refreshing(console) as show:
        while True:
            view, now = _snapshot(session, name, namespace)
            show(tree(view, now))
            if view.phase in TERMINAL_PHASES:
                return
            time.sleep(interval)
