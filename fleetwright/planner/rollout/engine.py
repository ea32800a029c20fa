"""The engine for one ``decide`` call: what the steps share while they walk the fleet.

``Engine`` acts on the call's working sets (``working``: pending, running, updated, failed nodes,
the budget tracker, and what the call has found so far). The step modules (``canary``, ``soak``,
``approval``, ``batching``) read and extend it; ``decision`` turns it into a ``Decision``. Starting
a node goes through ``Engine.try_start``, which asks ``refusals`` why it may not.
"""

from __future__ import annotations

from datetime import timedelta

from fleetwright.planner.health.analysis import ENDED, CheckPhase
from fleetwright.planner.policy.model import GATES_SCOPE
from fleetwright.planner.rollout import refusals
from fleetwright.planner.rollout.budget import BUDGET, Refusal
from fleetwright.planner.rollout.state import FleetGateOutcome, Halt, NodeStart
from fleetwright.planner.rollout.working import WorkingSets

# The next decision comes this long after one that started its most nodes (``Engine.capped``).
CAPPED_RETRY = timedelta(seconds=1)


class Engine(WorkingSets):
    """What the steps do with one ``decide`` call's working sets (``working``): start and hold
    nodes, halt, record fleet gates; made afresh for every call, never stored."""

    def halt_now(self, reason: str, scope: str) -> None:
        if self.halt is None:
            failure = self.policy.failure_for(scope) if scope != GATES_SCOPE else self.policy.failure
            self.halt = Halt(reason=reason, action=failure.action, scope=scope, at=self.now)

    def fleet_gate_moved(self, step: str, before: CheckPhase, after: CheckPhase) -> None:
        """Record a fleet gate of a ``step`` (soak, batches) that reached ``after`` this turn: an
        outcome, or a hold that began (not one that goes on, nor a return to measuring)."""
        if after != before and (after in ENDED or after is CheckPhase.MONITORING_UNAVAILABLE):
            self.fleet_gates.append(FleetGateOutcome(step=step, outcome=after))

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
