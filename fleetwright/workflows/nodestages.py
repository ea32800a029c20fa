"""The stages of a node workflow: the preflight (the work's checks as Jobs on the node in service)
and the node's stages, all in one activity (``run_stages``), or one activity per stage under
someone else's cordon so that the cordon is checked between stages. Each stage's request carries
the package state it records once it passed and the statuses shown around it; an abort cancels
the activity, which finishes the running stage and starts no other. Orchestration only: every
side effect is an activity.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

from fleetwright.workflows import nodestatus
from fleetwright.workflows.nodecordon import keep_cordoned
from fleetwright.workflows.nodeerrors import NodeFailedError, activity_failure
from fleetwright.workflows.noderun import NodeRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        NodePhase,
        StageRequest,
        StagesReport,
        StagesRequest,
        StatusNote,
    )
    from fleetwright.api.keys import NodeReason
    from fleetwright.planner.node.interrupts import InterruptKind
    from fleetwright.planner.node.preflight import preflight_steps
    from fleetwright.planner.node.state import NodePackageState
    from fleetwright.planner.node.work import NodeStep
    from fleetwright.workflows import retry


async def preflight(run: NodeRun) -> str | None:
    """The work's checks as Jobs on the node in service, in one activity: None when every one
    passed (the last recorded the node at the target, as its real stages would have), else why
    the node takes the normal path. An abort meanwhile ends the node before any cordon."""
    node_input = run.node_input
    steps = preflight_steps(node_input.work)
    done = run.ledger.states_after([(s.packages, s.stage) for s in node_input.work.steps])[-1]
    shown = StatusNote(
        phase=NodePhase.IN_PROGRESS, reason=NodeReason.PREFLIGHT, message=nodestatus.summary(run)
    )
    last = nodestatus.spared_note(run) if nodestatus.last_activity_shows_complete(run) else None
    requests = tuple(
        stage_request(run, step, done, shown if i == 0 else None, last).model_copy(
            update={"preflight": True} | ({} if i == len(steps) - 1 else {"record": None, "show_after": None})
        )
        for i, step in enumerate(steps)
    )
    run.stage = "preflight"
    report: StagesReport | None = None
    why = "the preflight stopped"
    try:
        report = await _stages(
            run, StagesRequest(profile=node_input.profile, node=node_input.node, stages=requests)
        )
    except NodeFailedError as error:
        why = str(error)
    if run.abort:
        raise NodeFailedError("aborted during the preflight")
    if report is not None and report.passed == len(steps):
        return None
    failure = report.failure if report is not None else None
    return f"{failure.outcome}: {failure.message}" if failure is not None else why


async def run_steps(run: NodeRun, first: StatusNote | None) -> None:
    """Every stage in one activity; under someone else's cordon one activity per stage, so that
    before each further stage the node is cordoned as ours if they lifted theirs."""
    steps = run.node_input.work.steps
    foreign = run.cordon is not None and not run.cordon.ours
    groups = [steps[i : i + 1] for i in range(len(steps))] if foreign else [steps] if steps else []
    for index, group in enumerate(groups):
        if index:
            await keep_cordoned(run)
        final = index == len(groups) - 1
        last = nodestatus.completed(run) if final and nodestatus.last_stage_shows_complete(run) else None
        await _run_group(run, group, first, last)
        first = None


async def _run_group(
    run: NodeRun, steps: tuple[NodeStep, ...], first: StatusNote | None, last: StatusNote | None
) -> None:
    """Consecutive stages in one activity, each stage's record and the statuses before the first
    and after the last included; an abort cancels it, and it stops once the running stage
    finished."""
    if run.abort:
        raise NodeFailedError("aborted before " + steps[0].stage.value)
    records = run.ledger.states_after([(s.packages, s.stage) for s in steps])
    requests = tuple(
        stage_request(run, step, record, first if i == 0 else None, last if i == len(steps) - 1 else None)
        for i, (step, record) in enumerate(zip(steps, records, strict=True))
    )
    run.stage = ", ".join(f"{s.stage.value} {s.packages[0]}" for s in steps)
    report = await _stages(
        run, StagesRequest(profile=run.node_input.profile, node=run.node_input.node, stages=requests)
    )
    for step in steps[: report.passed]:
        for name in step.packages:
            run.ledger.stage_done(name, step.stage)
    if report.passed == len(steps):
        return
    step = steps[report.passed]
    failure = report.failure
    if failure is None:
        # Stopped between stages (an abort) before this one started.
        raise NodeFailedError("aborted before " + step.stage.value)
    for name in step.packages:
        run.ledger.failed(name, f"{step.stage.value}: {failure.message}")
    await run.record()
    raise NodeFailedError(
        f"{step.stage.value} of {step.packages[0]} failed ({failure.outcome}): {failure.message}"
    )


def stage_request(
    run: NodeRun,
    step: NodeStep,
    record: NodePackageState,
    first: StatusNote | None,
    last: StatusNote | None,
) -> StageRequest:
    """``first`` and ``last``: the statuses shown before and after the stage; ``record``: the state
    it writes once it passed (after the reboot, for a reboot)."""
    node_input = run.node_input
    settings = node_input.settings
    reboot = step.interrupt is not None and step.interrupt.kind is InterruptKind.REBOOT
    return StageRequest(
        profile=node_input.profile,
        node=node_input.node,
        rollout_workflow_id=node_input.parent_workflow_id,
        profile_uid=node_input.profile_uid,
        generation=node_input.generation,
        package=run.packages[step.packages[0]],
        stage=step.stage,
        interrupt=step.interrupt,
        agent_image=settings.agent_image,
        namespace=settings.package_namespace,
        host_root=settings.host_root,
        node_order=node_input.node_order,
        tolerations=node_input.tolerations,
        pod_labels=settings.stage_pod_labels,
        pod_annotations=settings.stage_pod_annotations,
        backoff_limit=settings.stage_backoff_limit,
        image_pull_timeout_seconds=settings.image_pull_timeout_seconds,
        attempt=node_input.attempt,
        # This run is one pass over the node: its retried activities adopt its own Jobs, a later
        # pass gets its own.
        pass_id=workflow.info().run_id,
        record=record,
        reboot_timeout_seconds=settings.reboot_timeout_seconds if reboot else None,
        show_before=first,
        show_after=last,
    )


async def _stages(run: NodeRun, request: StagesRequest) -> StagesReport:
    # Each Job's own deadline bounds each attempt; allow its retries plus scheduling slack.
    bound = 0
    for stage in request.stages:
        bound += stage.package.stage_timeout_seconds * 4 + 600
        if stage.stage.is_interrupt:
            bound += run.node_input.settings.reboot_timeout_seconds
    handle = workflow.start_activity_method(
        NodeActivities.run_stages,
        request,
        start_to_close_timeout=timedelta(seconds=bound + 120),
        heartbeat_timeout=retry.heartbeat(run.node_input.settings),
        retry_policy=retry.LONG_WAIT,
        # An abort cancels it; the activity finishes the running stage and reports.
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=run.summary_of(NodeActivities.run_stages),
    )
    await workflow.wait_condition(lambda: handle.done() or run.abort)
    if not handle.done():
        handle.cancel()
    try:
        return await handle
    except ActivityError as error:
        raise activity_failure(error) from error
