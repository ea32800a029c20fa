"""What the humans' signals and updates do to a rollout run (``RolloutRun.controls`` and its
pending requests): pause, resume, abort, approve a step, retry or skip a failed node, release a
failed node back into service, a rollback a campaign demands, and the validators that refuse an
update the rollout cannot honour. Each asks for a decision now. A release's one side effect
(lifting the node's cordon and showing it Released) is an activity the loop runs with
``release_nodes``."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import END_QUARANTINE_SIGNAL, NodePhase, StatusNote, UncordonRequest
    from fleetwright.api.keys import NodeReason
    from fleetwright.workflows import retry
    from fleetwright.workflows.ids import node_workflow_id
    from fleetwright.workflows.payloads import Deletion, SpecChange


def set_flag(run: RolloutRun, **flags: bool) -> None:
    """Pause, resume or abort (``paused``/``aborted`` in the controls)."""
    run.controls = run.controls.model_copy(update=flags)
    run.decide_now = True


def change_spec(run: RolloutRun, change: SpecChange) -> None:
    run.new_spec = (change.profile, change.policy)
    if run.controls.rollback:  # a demanded rollback was for the spec it rolled back
        run.controls = run.controls.model_copy(update={"rollback": ""})
    run.decide_now = True


def demand_rollback(run: RolloutRun, reason: str) -> None:
    if not run.controls.rollback:
        run.controls = run.controls.model_copy(update={"rollback": reason or "rollback demanded"})
        run.decide_now = True


def delete(run: RolloutRun, deletion: Deletion) -> None:
    """Switch to removing the profile: its spec at deletion, the policy it had (or is changing to)."""
    pending = run.new_spec[1] if run.new_spec else None
    run.new_spec = (deletion.profile, deletion.policy or pending)
    run.controls = run.controls.model_copy(update={"deleting": True, "aborted": False})
    run.decide_now = True


def approve(run: RolloutRun, step: str) -> str:
    run.controls = run.controls.model_copy(
        update={"approvals": tuple(sorted({*run.controls.approvals, step}))}
    )
    run.decide_now = True
    return f"approved {step}"


def check_approve(run: RolloutRun, step: str) -> None:
    known = _approval_ids(run)
    if step not in known:
        raise ValueError(f"unknown approval step {step!r}; this policy has: {', '.join(known) or 'none'}")
    if step in run.controls.approvals:
        raise ValueError(f"{step} is already approved")


def retry_node(run: RolloutRun, node: str) -> str:
    run.retry.append(node)
    attempts = dict(run.controls.attempts)
    attempts[node] = attempts.get(node, 0) + 1
    run.controls = run.controls.model_copy(update={"attempts": attempts})
    run.decide_now = True
    return f"retrying {node}"


def check_retry(run: RolloutRun, node: str) -> None:
    failed = {f.node for f in run.state.failed} if run.state else set()
    if node not in failed:
        raise ValueError(
            f"{node} has not failed in this rollout (failed: {', '.join(sorted(failed)) or 'none'})"
        )


def release_node(run: RolloutRun, node: str) -> str:
    run.releases.append(node)
    run.decide_now = True
    return f"releasing {node}: its cordon is lifted and it takes new work (shown Released)"


def check_release(run: RolloutRun, node: str) -> None:
    """Only a node this rollout failed on, that no node workflow runs on, can be released."""
    check_retry(run, node)
    if node in run.releases:
        raise ValueError(f"{node} is already being released")


async def release_nodes(run: RolloutRun) -> None:
    """End the quarantine of each node a human released (its node workflow stops re-gating it),
    lift fleetwright's cordon on it and show it Released (a signal and one activity each; only a
    ``release_node`` update, which no older history has, queues one: no patch marker)."""
    assert run.state is not None
    profile = run.state.spec.profile
    failed = {f.node: f.message for f in run.state.failed}
    while run.releases:
        node = run.releases[0]
        await _end_quarantine(profile, node)
        message = (
            f"released into service by a human (fleetwright release); it had failed: {failed.get(node, '')}"
        )
        shown = StatusNote(phase=NodePhase.COMPLETE, reason=NodeReason.RELEASED, message=message)
        await workflow.execute_activity_method(
            NodeActivities.uncordon,
            UncordonRequest(profile=profile, node=node, show_after=shown),
            start_to_close_timeout=retry.API_CALL_TIMEOUT,
            retry_policy=retry.API_CALL,
            summary=f"uncordon {node}: released",
        )
        run.releases.pop(0)


async def _end_quarantine(profile: str, node: str) -> None:
    """Stop the node workflow re-gating ``node``, if it is still quarantined there."""
    handle = workflow.get_external_workflow_handle(node_workflow_id(profile, node))
    try:
        await handle.signal(END_QUARANTINE_SIGNAL)
    except ApplicationError:
        workflow.logger.info("%s: no node workflow to end the quarantine of", node)


def skip_node(run: RolloutRun, node: str) -> str:
    run.controls = run.controls.model_copy(update={"skipped": tuple(sorted({*run.controls.skipped, node}))})
    run.retry.append(node)  # a skipped failed node no longer holds the rollout
    run.decide_now = True
    return f"skipping {node}"


def check_skip(run: RolloutRun, node: str) -> None:
    if node in run.controls.skipped:
        raise ValueError(f"{node} is already skipped")
    running = {r.node for r in run.state.running} if run.state else set()
    if node in running:
        raise ValueError(f"{node} is being updated right now; abort or wait for it to finish")


def _approval_ids(run: RolloutRun) -> list[str]:
    if run.state is None:
        return []
    return run.state.spec.policy.approval_ids(s.name for s in run.state.compartments)
