"""What a node workflow shows and reports: its statuses (InProgress, Complete, Failed, Blocked, the
preflight's spared Complete), which activity carries the Complete one, and its result with the
report to its rollout that the last status carries. Pure functions of a ``NodeRun``: the status
activity itself is ``NodeRun.status``.
"""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows.noderun import NodeRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.payloads import NodePhase, NodeReport, StatusNote
    from fleetwright.api.keys import NodeReason
    from fleetwright.planner.node.preflight import SPARED
    from fleetwright.planner.rollout.observations import RunStatus
    from fleetwright.workflows.payloads import NodeResult


def last_activity_shows_complete(run: NodeRun) -> bool:
    """Complete rides on the last activity (the uncordon, else the last stage), unless the runtime
    taint's release still follows it."""
    return not run.node_input.runtime_required


def last_stage_shows_complete(run: NodeRun) -> bool:
    """Complete rides on the last stage when nothing follows it: no uncordon, no node gate."""
    return last_activity_shows_complete(run) and not run.ours() and not run.gated()


def summary(run: NodeRun) -> str:
    stages = ", ".join(f"{s.stage.value}({'+'.join(s.packages)})" for s in run.node_input.work.steps)
    return f"{run.node_input.profile}: {stages}"


def updating(run: NodeRun, why: str = "") -> StatusNote:
    message = f"{why}; {summary(run)}" if why else summary(run)
    return StatusNote(phase=NodePhase.IN_PROGRESS, reason=NodeReason.UPDATING, message=message)


def completed(run: NodeRun) -> StatusNote:
    """The Complete status, with the node's report: whichever activity shows it sends it."""
    gate = run.gate
    return StatusNote(
        phase=NodePhase.COMPLETE,
        reason=NodeReason.GATE_PASSED if gate is not None else NodeReason.COMPLETE,
        message=summary(run) + (f"; {gate.summary()}" if gate is not None else ""),
        report=report_of(run, RunStatus.SUCCEEDED, "complete"),
    )


def spared_note(run: NodeRun) -> StatusNote:
    """The Complete status of a node the preflight spared, with its report."""
    report = report_of(run, RunStatus.SUCCEEDED, SPARED, spared=True)
    message = f"{run.node_input.profile}: {SPARED}"
    reason = NodeReason.PREFLIGHT_PASSED
    return StatusNote(phase=NodePhase.COMPLETE, reason=reason, message=message, report=report)


def last(run: NodeRun, phase: NodePhase, reason: str, message: str) -> StatusNote:
    """A status the node's workflow ends with, carrying its report (a failure)."""
    report = report_of(run, RunStatus.FAILED, message)
    return StatusNote(phase=phase, reason=reason, message=message, report=report)


def outcome(run: NodeRun, status: RunStatus, message: str, spared: bool = False) -> NodeResult:
    node, target = run.node_input.node, run.node_input.target
    return NodeResult(node=node, target=target, status=status, message=message, spared=spared)


def result(run: NodeRun, status: RunStatus, message: str, spared: bool = False) -> NodeResult:
    """The workflow's result; its last activity sent it to the rollout."""
    run.stage = "done"
    return outcome(run, status, message, spared)


def report_of(run: NodeRun, status: RunStatus, message: str, spared: bool = False) -> NodeReport:
    return NodeReport(
        rollout_workflow_id=run.node_input.parent_workflow_id,
        result=outcome(run, status, message, spared),
    )
