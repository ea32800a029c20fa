"""What the rollout shows of itself after every turn: its progress (the ``progress`` query and the
memo), its search attributes (those the namespace has) and the current details the Temporal UI
shows."""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows.pinning import shown
from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.planner.rollout.state import Decision
    from fleetwright.workflows import search as sa
    from fleetwright.workflows.payloads import Progress
    from fleetwright.workflows.progress import current_details, rollout_progress, search_attributes


def publish(run: RolloutRun, decision: Decision, phase: str | None = None) -> Progress:
    generation = run.profile.metadata.generation or 0
    unregistered = run.unregistered if run.settings.search_attributes else ()
    progress = rollout_progress(
        decision,
        controls=run.controls,
        held=run.held,
        generation=generation,
        phase=phase,
        unregistered_search_attributes=unregistered,
    )
    progress = shown(run, progress)
    run.progress = progress
    if run.settings.search_attributes:
        sa.upsert(search_attributes(progress, decision.state.spec.packages), run.unregistered)
    workflow.upsert_memo(run.memo())
    workflow.set_current_details(current_details(progress, decision))
    return progress
