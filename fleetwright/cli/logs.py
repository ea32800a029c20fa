"""``fleetwright logs PROFILE NODE [--stage S]``: the logs of the stage Job fleetwright ran on a
node, also after it failed (failed Jobs are kept for exactly this); a node gate's validation Jobs
are among them (stage ``validate``, the validation's name as the package).

Picks the newest stage Job of the profile on the node (of ``--stage`` when given; ``--all`` for
every one), its newest pod, and prints every container in run order (copy, stage, check), read
through the apiserver's ``pods/log`` like ``kubectl logs``. Owns the selection and the printing;
reading is ``fleetwright.kube.stagelogs``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from fleetwright.cli.app import app
from fleetwright.cli.session import (
    CliError,
    NamespaceOpt,
    Output,
    OutputOpt,
    Session,
    check_output,
    emit,
)
from fleetwright.errors import FleetwrightError
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

if TYPE_CHECKING:
    from rich.console import Console

    from fleetwright.cli.reports import ContainerLog
    from fleetwright.kube.stagelogs import StageJobFacts


def choose(jobs: list[StageJobFacts], every: bool) -> list[StageJobFacts]:
    """The newest Job, or all of them oldest first (``jobs`` come oldest first)."""
    return list(jobs) if every else list(jobs[-1:])


async def read_logs(
    session: Session, profile: str, node: str, *, stage: str | None, namespace: str, every: bool
) -> list[ContainerLog]:
    from fleetwright.kube.stagelogs import container_log, job_pods, stage_jobs

    jobs = await asyncio.to_thread(stage_jobs, session.api, namespace, profile, node, stage)
    if not jobs:
        which = f" of stage {stage}" if stage else ""
        raise CliError(
            f"no stage Job{which} of NodeProfile {profile} on node {node} in namespace {namespace}"
        )
    out: list[ContainerLog] = []
    for job in choose(jobs, every):
        pods = await asyncio.to_thread(job_pods, session.api, namespace, job.name)
        if not pods:
            raise CliError(f"stage Job {namespace}/{job.name} has no pods left (its logs are gone)")
        pod = pods[-1]
        for container in pod.containers:
            waiting = pod.never_started.get(container)
            if waiting is not None:
                out.append(_entry(job, pod.name, container, "", never_started=waiting))
                continue
            try:
                text = await asyncio.to_thread(container_log, session.api, namespace, pod.name, container)
            except FleetwrightError as error:
                raise CliError(
                    f"cannot read the log of pod {namespace}/{pod.name} container {container} "
                    f"(stage Job {job.name}, {job.stage} {job.package}): {error}"
                ) from error
            out.append(_entry(job, pod.name, container, text))
    return out


def _entry(
    job: StageJobFacts, pod: str, container: str, log: str, never_started: str | None = None
) -> ContainerLog:
    from fleetwright.cli.reports import ContainerLog

    return ContainerLog(
        job=job.name,
        package=job.package,
        stage=job.stage,
        result=job.finished or ("Running" if job.active else "Pending"),
        pod=pod,
        container=container,
        log=log,
        never_started=never_started,
    )


def render(logs: list[ContainerLog], console: Console) -> None:
    from rich.markup import escape

    for entry in logs:
        console.print(
            f"[bold]==> {escape(entry.stage)} {escape(entry.package)} ({escape(entry.result)}) "
            f"pod/{escape(entry.pod)} container {escape(entry.container)} <==[/]",
            highlight=False,
        )
        if entry.never_started is not None:
            console.out(f"(never started: {entry.never_started})", highlight=False)
        else:
            console.out(entry.log.rstrip("\n"), highlight=False)


@app.command("logs")
def logs_command(
    ctx: typer.Context,
    profile: Annotated[str, typer.Argument(help="The NodeProfile.")],
    node: Annotated[str, typer.Argument(help="The node.")],
    *,
    stage: Annotated[
        str | None,
        typer.Option(
            "--stage", help="apply, config, interrupt, post-interrupt, upgrade, uninstall, validate."
        ),
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Every stage Job on the node, oldest first.")] = False,
    namespace: NamespaceOpt = PACKAGE_NAMESPACE,
    output: OutputOpt = "table",
) -> None:
    """The logs of the newest stage Job on a node (every container, in run order), also after failure."""
    session = Session.of(ctx)
    fmt = check_output(output)
    logs = session.run(
        lambda: read_logs(session, profile, node, stage=stage, namespace=namespace, every=every)
    )
    emit(logs, fmt, lambda console: render(logs, console))
    if fmt is Output.TABLE and not logs:
        typer.echo("(no containers)")
