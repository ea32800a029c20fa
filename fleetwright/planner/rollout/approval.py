"""The approval step: the scope waits until a human approves ``<scope>/<step>`` (the workflow's
``approve`` update puts it in the observations), or halts when the step's timeout passes first."""

from __future__ import annotations

from datetime import timedelta

from fleetwright.planner.policy.model import ApprovalStep
from fleetwright.planner.rollout.engine import Engine
from fleetwright.planner.rollout.state import ScopeState


def approval(engine: Engine, scope: ScopeState, step: ApprovalStep) -> bool:
    """Done once approved; until then the engine wakes at the timeout, if the step has one."""
    approval_id = f"{scope.name}/{step.name}"
    if approval_id in engine.observations.approvals:
        return True
    if step.timeout_seconds is not None:
        deadline = (scope.entered_at or engine.now) + timedelta(seconds=step.timeout_seconds)
        if engine.now >= deadline:
            engine.halt_now(f"approval {approval_id} timed out", scope.name)
            return False
        engine.waits.append(deadline)
    engine.notes.append(f"awaiting approval {approval_id}")
    return False
