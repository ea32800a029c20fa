"""Where a rollout's state begins: a fresh rollout of a spec (``begin``), a spec change
(``retarget``: new packages begin anew, a policy change keeps the progress) and the rollback of a
rollout whose failure rule fired (``begin_rollback``; what it returns is ``planner.rollout.rollback``'s)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from fleetwright.planner.policy.model import DEFAULT_COMPARTMENT, GATES_SCOPE, BatchesStep, RolloutPolicy
from fleetwright.planner.policy.windows import ensure_aware
from fleetwright.planner.rollout.rollback import rollback_of, rollback_spec
from fleetwright.planner.rollout.sizing import BatchState
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.state import RolloutState, ScopeState


def begin(
    spec: RolloutSpec, now: datetime, previous: RolloutState | None = None, unreported: Iterable[str] = ()
) -> RolloutState:
    """A fresh rollout of ``spec``. Nodes still running for ``previous`` are carried over: they keep
    holding budget until they finish, so a spec change never bypasses the cap. So are
    ``unreported``: nodes ``previous`` counted as failed from their records whose node workflows
    have not reported yet (they are still finishing, so none may start on them)."""
    ensure_aware(now)
    names = sorted([DEFAULT_COMPARTMENT, *(c.name for c in spec.policy.compartments)])
    earlier: tuple[str, ...] = ()
    since = now
    if previous is not None:
        running = {run.node for run in previous.running}
        earlier = tuple(sorted(set(previous.running_for_earlier_target) | running | set(unreported)))
        if previous.spec.target == spec.target:
            since = previous.rollout_since  # another pass of the same rollout
    return RolloutState(
        spec=spec,
        started_at=now,
        since=since,
        gates=ScopeState(name=GATES_SCOPE),
        compartments=tuple(_fresh_scope(spec.policy, name, previous) for name in names),
        running_for_earlier_target=earlier,
    )


def _fresh_scope(policy: RolloutPolicy, name: str, previous: RolloutState | None) -> ScopeState:
    """A compartment's progress at the start of a rollout: none, except the size of the last batch
    the previous rollout ran there when its batches do not reset (``reset_batch_size``)."""
    before = previous.scope(name) if previous is not None else None
    steps = [s for s in policy.compartment_steps(name) if isinstance(s, BatchesStep)]
    if before is None or not steps or steps[0].reset_batch_size or before.batch.last_size == 0:
        return ScopeState(name=name)
    return ScopeState(name=name, batch=BatchState(last_size=before.batch.last_size))


def retarget(state: RolloutState, spec: RolloutSpec, now: datetime) -> RolloutState:
    """Apply a spec change. New packages (a new target) start a new rollout, with a new canary;
    a policy-only change keeps the progress and continues under the new policy. The spec a
    rollback returned from (re-applied, or edited in its policy only) does not start again: the
    rollback stays, under the new policy, until a spec with other packages comes."""
    of = state.spec.rollback
    if of is not None and spec.target == of.target:
        spec = rollback_spec(spec, of)
    if spec.target != state.spec.target:
        return begin(spec, now, previous=state)
    scopes = {c.name for c in spec.policy.compartments} | {DEFAULT_COMPARTMENT}
    kept = [s for s in state.compartments if s.name in scopes]
    added = [ScopeState(name=n) for n in sorted(scopes - {s.name for s in kept})]
    return state.model_copy(
        update={"spec": spec, "compartments": tuple(sorted(kept + added, key=lambda s: s.name))}
    )


def begin_rollback(state: RolloutState, now: datetime, unreported: Iterable[str] = ()) -> RolloutState:
    """The rollback of ``state``'s rollout, starting now. Its nodes still running (``unreported``
    too: see ``begin``) keep holding the budget until they finish; then they are returned too."""
    return begin(rollback_spec(state.spec, rollback_of(state)), now, previous=state, unreported=unreported)
