"""A campaign's member rollout reports to its campaign: after each turn, when what it reports
(phase, counts, message) changed, one ``cluster_progress`` signal to the parent workflow.

Reached only by a rollout a campaign started (it has a parent): a NodeProfile's rollout has none,
so no history an older release recorded takes this path. Must not decide anything."""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.planner.campaign import ClusterReport
    from fleetwright.workflows.payloads import ClusterProgress, Progress

CLUSTER_PROGRESS_SIGNAL = "cluster_progress"


def report_of(progress: Progress) -> ClusterReport:
    return ClusterReport(
        phase=progress.phase,
        generation=progress.generation,
        targeted=progress.targeted,
        updated=progress.updated,
        failed=progress.failed,
        message=progress.message,
    )


async def report_to_campaign(run: RolloutRun) -> None:
    parent = workflow.info().parent
    if parent is None or run.progress is None:
        return
    report = report_of(run.progress)
    if report == run.reported:
        return
    run.reported = report
    handle = workflow.get_external_workflow_handle(parent.workflow_id)
    await handle.signal(
        CLUSTER_PROGRESS_SIGNAL, ClusterProgress(workflow_id=workflow.info().workflow_id, report=report)
    )
