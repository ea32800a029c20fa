"""A deliberately incompatible rollout workflow, for the replay test to prove that such a change
fails it: one more timer before the first turn, not guarded by a patch marker. Never registered
by a worker. Its own module, since the workflow sandbox re-imports the module a workflow is
defined in."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fleetwright.workflows.payloads import Progress, RolloutInput
    from fleetwright.workflows.rollout import ROLLOUT_WORKFLOW, RolloutWorkflow


@workflow.defn(name=ROLLOUT_WORKFLOW)
class IncompatibleRollout(RolloutWorkflow):
    @workflow.run
    async def run(self, rollout: RolloutInput) -> Progress:
        await workflow.sleep(1)
        return await super().run(rollout)
