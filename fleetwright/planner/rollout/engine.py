"""The engine for one ``decide`` call: what the steps share while they walk the fleet.

``Engine`` holds the call's working sets (pending, running, updated, failed nodes), the budget
tracker, and what the call has found so far: the nodes it starts, the nodes held and why, the
times it must wake at, its notes and its halt. The step modules (``canary``, ``soak``,
``approval``, ``batching``) read and extend it; ``decision`` turns it into a ``Decision``. Starting
a node goes through ``Engine.try_start``, which asks ``refusals`` why it may not.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from fleetwright.planner.budget import BUDGET, BudgetTracker, Refusal
from fleetwright.planner.observations import Observations
from fleetwright.planner.policy import GATES_SCOPE
from fleetwright.planner.rollout import refusals
from fleetwright.planner.rolloutstate import Halt, NodeStart, RolloutState
from fleetwright.planner.targets import FleetView
from fleetwright.planner.windows import longest_remaining

# At most this many nodes start per decision (see ``Engine.capped``), and the next decision comes
# this long after a capped one.
MAX_STARTS_PER_DECISION = 200
CAPPED_RETRY = timedelta(seconds=1)


class Engine:
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
        self.halt: Halt | None = None
        # Scope -> the refusal of a budget that only this rollout's failed nodes hold.
        self.held_by_failed: dict[str, str] = {}
        self.window_left = longest_remaining(self.policy.windows, now)
        self.fit_cache: dict[int, datetime | None] = {}
        self.held_since = dict(state.held_for_workloads)

    def halt_now(self, reason: str, scope: str) -> None:
        if self.halt is None:
            failure = self.policy.failure_for(scope) if scope != GATES_SCOPE else self.policy.failure
            self.halt = Halt(reason=reason, action=failure.action, scope=scope, at=self.now)

    # -- where the nodes are ------------------------------------------------------------------

    def queue(self, members: list[str]) -> list[str]:
        """The members still pending, in rollout order (one pass per scope and call; afterwards
        ``self.pending`` membership tells which of them started meanwhile)."""
        return [n for n in members if n in self.pending]

    def running_in(self, scope: str) -> int:
        if scope == GATES_SCOPE:
            return len(self.running)
        return sum(1 for n in self.running if self.view.compartment_of.get(n) == scope)

    def finishing_in(self, scope: str) -> int:
        """Nodes of ``scope`` still running for an earlier target. The scope cannot be done while
        they run: once they end they may need this rollout's work (a rollback returns a node that
        was still failing its forward change when the rule fired)."""
        if scope == GATES_SCOPE:
            return 0  # the gates try the new change on nodes that can start now; these cannot
        return sum(1 for n in self.earlier if self.view.compartment_of.get(n) == scope)

    def unfinished(self, node: str) -> bool:
        if node in self.updated or node in self.failed:
            return False
        return node in self.running or node in self.pending

    # -- starting a node ----------------------------------------------------------------------

    def try_start(self, node: str, scope: str, batch: int) -> bool:
        refusal = refusals.refusal(self, node)
        if refusal is not None:
            self.hold(node, refusal)
            return False
        self.tracker.take(node)
        self.pending.discard(node)
        self.running.add(node)
        self.blocked.pop(node, None)
        self.waiting.pop(node, None)
        self.starts.append(
            NodeStart(
                node=node,
                scope=scope,
                compartment=self.view.compartment_of[node],
                batch=batch,
                work=self.view.work[node],
                expected_seconds=self.view.expected_seconds(node),
                regate=self._regate(node),
            )
        )
        return True

    def _regate(self, node: str) -> bool:
        """A rollback returns a node whose health gate failed: it runs the gate again there, and
        failing it again is its hardware's failure."""
        obs = self.view.nodes.get(node)
        return obs is not None and obs.gate_failed and self.view.work[node].returns_to is not None

    def start_free(self, members: list[str], want: int, scope: str, batch: int) -> list[str]:
        """Start up to ``want`` of ``members`` that cost the budget nothing (already unavailable)."""
        free = self.pending & self.tracker.unavailable
        started: list[str] = []
        for node in members:
            if len(started) >= want:
                break
            if node in free and self.try_start(node, scope, batch):
                started.append(node)
        return started

    def capped(self) -> None:
        """A batch wider than the room left in this decision fills on the next one, a second
        later: a decision with hundreds of starts is a payload of hundreds of KB (the SDK warns at
        512 KiB and fails at 2 MiB), and as many child workflow starts in one workflow task."""
        if self.now + CAPPED_RETRY not in self.waits:
            self.waits.append(self.now + CAPPED_RETRY)
            self.notes.append(f"more starts next decision (at most {self.max_starts} per decision)")

    def hold(self, node: str, refusal: Refusal) -> None:
        held, other = (self.waiting, self.blocked) if refusal.waiting else (self.blocked, self.waiting)
        held[node] = refusal.reason
        other.pop(node, None)
        self.watch_fleet = self.watch_fleet or refusal.outside
        if refusal.held_by_failed is not None:
            self.held_by_failed.setdefault(refusal.held_by_failed, refusal.reason)

    def budget_refusal(self, node: str) -> Refusal | None:
        """The refusal just recorded for ``node`` when it was the budget's."""
        waiting = node in self.waiting
        reason = self.waiting.get(node) or self.blocked.get(node, "")
        return Refusal(reason, waiting) if reason.startswith(BUDGET) else None


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
