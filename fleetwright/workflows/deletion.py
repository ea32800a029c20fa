"""Deleting a profile: the ``delete`` signal switches the spec to the removal target
(``convert.removal_packages``: every ``uninstall.enabled`` package uninstalled), which rolls out
under the same policy as any change. Once the removal holds on every targeted node, the clean-up
activity removes what the profile wrote on the nodes and releases the NodeProfile's finalizer,
and the workflow ends. A halted removal keeps the finalizer."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from fleetwright.workflows.rolloutrun import RolloutRun
from fleetwright.workflows.visibility import publish

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import CleanupRequest
    from fleetwright.planner.rollout.state import Decision, Phase
    from fleetwright.workflows import retry


def removal_done(run: RolloutRun, decision: Decision) -> bool:
    """Deleting, and this decision (not one taken before the delete signal arrived) says the
    removal target holds on every targeted node with no node workflow still running."""
    return (
        run.controls.deleting
        and run.new_spec is None
        and decision.state.spec.target == run.spec().target
        and _removed(decision)
    )


async def clean_up(run: RolloutRun, decision: Decision) -> bool:
    """The removal is complete: clean the nodes and release the finalizer. A failure (the API
    refuses, RBAC) is shown and tried again after the observe interval; never a failed run."""
    meta = run.profile.metadata
    request = CleanupRequest(profile=meta.name, profile_uid=meta.uid or "")
    try:
        report = await workflow.execute_activity_method(
            NodeActivities.clean_up,
            request,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=retry.API_CALL,
            summary=f"remove {meta.name} from its nodes and release the finalizer",
        )
    except ActivityError as error:
        publish(run, decision.model_copy(update={"message": f"clean-up of the nodes failed: {error.cause}"}))
        await workflow.sleep(timedelta(seconds=run.settings.observe_interval_seconds))
        return False
    workflow.logger.info("profile %s removed from %d node(s)", meta.name, len(report.nodes))
    return True


def _removed(decision: Decision) -> bool:
    """The removal target holds on every targeted node and no node workflow is still running."""
    return decision.phase is Phase.COMPLETE and decision.counts.needs_work == 0 and not decision.state.running
