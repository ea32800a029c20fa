"""Sending a node workflow's result to its rollout from the activity that shows the node's last
status (``StatusNote.report``), instead of a signal from the node workflow: that signal cost the
node workflow a workflow task of its own (the server drops a signal whose sender has closed, so
the workflow had to wait for it to be delivered before completing).

Sent after the status shows, so whatever the Complete or Failed status ends (the start claim)
has ended when the rollout hears of it. A retried activity may send it again: the rollout takes
a node's report only while it waits for that node's run towards that target. A rollout that is
gone (deleted profile) no longer listens: the result stays the node workflow's own. Must not
decide what the result is; the node workflow did.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.activities.payloads import NODE_FINISHED_SIGNAL, NodeReport


async def send(report: NodeReport | None) -> None:
    if report is None:
        return
    handle = activity.client().get_workflow_handle(report.rollout_workflow_id)
    try:
        await handle.signal(NODE_FINISHED_SIGNAL, report.result)
    except RPCError as error:
        if error.status is not RPCStatusCode.NOT_FOUND:
            raise
        activity.logger.warning(
            "rollout %s gone; the result of %s stays in its node workflow",
            report.rollout_workflow_id,
            report.result.node,
        )
