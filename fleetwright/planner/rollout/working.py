"""One ``decide`` call's working sets: the pending, running, updated and failed nodes, the budget
tracker, and what the call has found so far (the nodes it starts, the nodes held and why, the
times it must wake at, its notes and its halt). ``Engine`` acts on them; ``refusals`` reads and
extends them without knowing the engine, so neither imports the other's module in a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from fleetwright.planner.policy.windows import longest_remaining
from fleetwright.planner.rollout.budget import BudgetTracker, Refusal
from fleetwright.planner.rollout.observations import Observations
from fleetwright.planner.rollout.state import FleetGateOutcome, Halt, NodeStart, RolloutState
from fleetwright.planner.rollout.targets import FleetView

# At most this many nodes start per decision (see ``Engine.capped``).
MAX_STARTS_PER_DECISION = 200


class WorkingSets:
    """One ``decide`` call's working state; made afresh for every call, never stored."""

    def __init__(
        self,
        state: RolloutState,
        view: FleetView,
        observations: Observations,
        now: datetime,
        max_starts: int = MAX_STARTS_PER_DECISION,
    ) -> None:
        if max_starts < 1:
            raise ValueError("max_starts must be at least 1")
        self.max_starts = max_starts
        self.view = view
        self.observations = observations
        self.now = now
        self.policy = state.spec.policy
        self.running = {run.node for run in state.running}
        self.updated = set(state.updated)
        self.failed = {f.node: f for f in state.failed}
        self.earlier = set(state.running_for_earlier_target)
        busy = self.running | self.earlier | view.reported_running
        self.tracker = BudgetTracker(
            view.foreign_unavailable,
            view.compartment_of,
            view.cap,
            view.compartment_caps,
            ours=busy,
            reporting=self.running,
            failed=_left_failed(view, [*self.failed, *view.prepared.failed_earlier], busy),
        )
        self.pending = (
            view.prepared.needing
            - busy
            - self.updated
            - self.failed.keys()
            - view.prepared.failed_earlier.keys()
        )
        self.starts: list[NodeStart] = []
        self.waits: list[datetime] = []
        # Nodes that need work and cannot start now, and why: blocked (only a change outside the
        # rollout lets them start) or waiting (they start by themselves once the rollout's own
        # work frees budget, or a window opens). A node is in one of them at most.
        self.blocked: dict[str, str] = {}
        self.waiting: dict[str, str] = {}
        # (refusal, members, from index): the rest of a compartment found the cap full; their
        # reasons are filled in only when the decision is assembled (a full cap must not cost O(n)
        # refusals).
        self.budget_waits: list[tuple[Refusal, list[str], int]] = []
        # Something only a fresh observation of the fleet shows can change this decision
        # (``Decision.watch_fleet``); blocked nodes count by themselves.
        self.watch_fleet = bool(self.earlier)
        self.notes: list[str] = []
        self.fleet_gates: list[FleetGateOutcome] = []
        self.halt: Halt | None = None
        # Scope -> the refusal of a budget that only this rollout's failed nodes hold.
        self.held_by_failed: dict[str, str] = {}
        self.window_left = longest_remaining(self.policy.windows, now)
        self.fit_cache: dict[int, datetime | None] = {}
        self.held_since = dict(state.held_for_workloads)
        self.unit_since = dict(state.unit_waits)


def _left_failed(view: FleetView, failed: Iterable[str], busy: set[str]) -> set[str]:
    """Of ``failed`` (nodes whose change toward this target failed), those unavailable only because
    this profile left them cordoned: no node workflow runs there, nobody else holds them."""
    out: set[str] = set()
    for node in failed:
        obs = view.nodes.get(node)
        left = obs is not None and obs.own_cordon and not obs.unschedulable and not obs.disruptions
        if left and node not in busy:
            out.add(node)
    return out
