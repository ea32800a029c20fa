"""When the rollout's target changes: a spec change the controller signalled (new packages begin
a new rollout, a policy edit keeps the progress, a new generation lifts an abort), and a fresh
pass over the same target when a finished rollout's fleet gained nodes that need work."""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.planner.rollout.lifecycle import begin, retarget
    from fleetwright.planner.rollout.state import Decision, Phase


def apply_spec_change(run: RolloutRun) -> None:
    if run.new_spec is None or run.state is None:
        return
    replaced, target = run.profile, run.spec().target
    profile, policy = run.new_spec
    if (profile.metadata.generation or 0) != (run.profile.metadata.generation or 0):
        # An abort stops the profile's rollout until its spec changes (or a human resumes):
        # a new generation is a rollout of its own, an edit of the policy alone is not.
        run.controls = run.controls.model_copy(update={"aborted": False})
        run.abort_sent = set()  # a later abort reaches the nodes this rollout starts anew
    run.profile = profile
    run.policy = policy or run.policy
    run.new_spec = None
    if run.spec().target != target and run.state.spec.rollback is None:
        # New packages: the profile they replace is what a rollback of their rollout returns
        # to. After a rollback the nodes carry the profile before the rolled-back one again,
        # so that one stays what a later rollback returns to.
        run.previous = replaced
    spec = run.spec()
    if spec.target != run.state.spec.target:
        run.controls = run.controls.model_copy(update={"approvals": (), "skipped": ()})
    run.state = retarget(run.state, spec, workflow.now())


def another_pass(run: RolloutRun, decision: Decision) -> bool:
    """A finished rollout whose fleet gained nodes needing work (a node joined, or drifted)
    begins a fresh pass over the same target: the policy's steps run again for those nodes,
    canary first. Once per wake-up, so nodes that cannot be worked on do not spin the loop."""
    assert run.state is not None
    if decision.phase is not Phase.COMPLETE or decision.counts.needs_work == 0 or run.fresh_pass:
        run.fresh_pass = False
        return False
    run.fresh_pass = True
    run.state = begin(run.state.spec, workflow.now(), previous=run.state)
    return True
