"""Folding outcomes in: the runs that finished since the last call move to the state's updated or
failed nodes and count in their scopes' batches; runs whose node left the fleet are dropped."""

from __future__ import annotations

from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.planner.rollout.sizing import record_nodes
from fleetwright.planner.rollout.state import FailedNode, RolloutState, RunningNode, ScopeState
from fleetwright.planner.rollout.targets import FleetView


def absorb(state: RolloutState, view: FleetView) -> RolloutState:
    """Move finished runs to updated/failed and count them in their scopes."""
    still: list[RunningNode] = []
    newly: set[str] = set()
    spared = state.spared
    failed = list(state.failed)
    scopes = {s.name: s for s in (state.gates, *state.compartments)}
    for run in state.running:
        obs = view.nodes.get(run.node)
        if obs is None or obs.run is RunStatus.GONE:
            # The node left the fleet (deleted, or no longer targeted): nothing to wait for, and no
            # failure to count against the budgets. A node re-registered under the name is new work.
            continue
        work = view.work[run.node]
        was_spared = False
        if obs.run is RunStatus.FAILED or work.failed is not None:
            message = obs.message or work.failed or ""
            failed.append(FailedNode(node=run.node, scope=run.scope, message=message, suspect=run.regate))
            ok = False
        elif obs.run is RunStatus.SUCCEEDED or (obs.run is None and not work.needs_work):
            # A node is done when its workflow says so. Its recorded state needing no work is not
            # enough while the workflow runs: it still uncordons and releases the runtime taint
            # after recording the last stage. Only a node whose status nobody reports (a caller
            # without node workflows) is judged by its record alone.
            newly.add(run.node)
            was_spared = obs.spared and obs.run is RunStatus.SUCCEEDED
            spared += was_spared
            ok = True
        else:
            still.append(run)
            continue
        _count_finished(scopes, view.compartment_of[run.node], run, ok, spared=was_spared)
    earlier = tuple(
        n
        for n in state.running_for_earlier_target
        if n in view.nodes and view.nodes[n].run is RunStatus.RUNNING
    )
    return state.model_copy(
        update={
            "running": tuple(still),
            "updated": tuple(sorted(newly.union(state.updated))) if newly else state.updated,
            "failed": tuple(sorted(failed, key=lambda f: f.node)),
            "running_for_earlier_target": earlier,
            "spared": spared,
            "gates": scopes[state.gates.name],
            "compartments": tuple(scopes[s.name] for s in state.compartments),
        }
    )


def _count_finished(
    scopes: dict[str, ScopeState], compartment: str, run: RunningNode, ok: bool, *, spared: bool = False
) -> None:
    """Count a finished node in its compartment's progress and, if it is in the open batch, in
    that batch; a node its preflight spared leaves the batch instead: it did no work and
    disrupted nothing, so its place goes to another node (a batch is of nodes changed, and a fleet
    half at the target takes half the batches)."""
    scope = scopes.get(compartment)
    if scope is None:
        return
    update: dict[str, object] = {
        "batch": record_nodes(scope.batch, succeeded=int(ok), failed=int(not ok)),
    }
    if run.scope == compartment and run.node in scope.current:
        if spared:
            update["current"] = tuple(n for n in scope.current if n != run.node)
        else:
            key = "current_succeeded" if ok else "current_failed"
            update[key] = getattr(scope, key) + 1
    scopes[compartment] = scope.model_copy(update=update)
