"""The rollout's own state between ``decide`` calls, and the decision ``decide`` returns.

The state is small on purpose (it is a Temporal payload carried across continue-as-new): step
pointers, batch counters, the open batch, the nodes running, updated and failed. Which nodes still
need work is never stored: it is recomputed from the observed node annotations every time.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from fleetwright.api.compat import added_fields
from fleetwright.planner.base import Frozen
from fleetwright.planner.health.analysis import CheckPhase, Measurement
from fleetwright.planner.node.work import NodeWork
from fleetwright.planner.policy.model import FailureAction
from fleetwright.planner.rollout.sizing import BatchState
from fleetwright.planner.rollout.spec import RolloutSpec


class ScopeState(Frozen):
    """Progress of one scope: the rollout-wide gates, or one compartment."""

    name: str
    step: int = 0
    entered_at: datetime | None = None
    """When the current step started (soak and approval timers count from here)."""
    canary: tuple[str, ...] | None = None
    """The canary nodes, fixed once chosen."""
    batch: BatchState = BatchState()
    current: tuple[str, ...] = ()
    """Nodes started in the open batch."""
    current_size: int = 0
    """Planned size of the open batch; 0 when no batch is open."""
    current_succeeded: int = 0
    current_failed: int = 0
    batch_closed_at: datetime | None = None
    fleet_gate: tuple[Measurement, ...] = ()
    """The current step's fleet-gate measurements so far (of each check's current run, in a
    batches step), in the order they were taken."""
    fleet_gate_next: dict[str, datetime] = Field(default_factory=dict)
    """Check name -> when its next measurement is due: one interval after its last, for a batches
    step's background checks (a soak's follow their schedule from ``entered_at``)."""
    _since_0_1_0 = added_fields("fleet_gate", "fleet_gate_next")

    @property
    def open(self) -> bool:
        return self.current_size > 0


class RunningNode(Frozen):
    node: str
    scope: str
    batch: int
    """0 for a canary node, else the batch number within its compartment."""
    started_at: datetime
    regate: bool = False
    """A rollback returns a node that failed its health gate and runs the gate again there."""
    _since_0_1_0 = added_fields("regate")


class FailedNode(Frozen):
    node: str
    scope: str
    message: str = ""
    suspect: bool = False
    """The node failed its health gate again on the version a rollback returned it to: its
    hardware is suspect, not the change, so the failure rule does not count it (it stays cordoned
    and Failed, holding its part of the budget)."""
    _since_0_1_0 = added_fields("suspect")


class Halt(Frozen):
    reason: str
    action: FailureAction = FailureAction.HALT
    scope: str
    at: datetime


class RolloutState(Frozen):
    spec: RolloutSpec
    started_at: datetime
    since: datetime | None = None
    """When this target began (a fresh pass over the same target keeps it): with the target it
    names this rollout in the ``before`` it records on each node it changes. None: ``started_at``."""
    gates: ScopeState
    compartments: tuple[ScopeState, ...] = ()
    running: tuple[RunningNode, ...] = ()
    updated: tuple[str, ...] = ()
    """Nodes this rollout completed (sorted); soak health gates watch them."""
    failed: tuple[FailedNode, ...] = ()
    running_for_earlier_target: tuple[str, ...] = ()
    """Nodes still running work for an earlier target: they hold budget until they finish."""
    halt: Halt | None = None
    held_for_workloads: dict[str, datetime] = Field(default_factory=dict)
    """Nodes held until the pods the policy's ``workloadWait`` matches finish: since when (the
    wait's bound counts from there). A node leaves it when it starts."""
    spared: int = 0
    """Nodes this rollout completed through their preflight, never cordoned (``planner.node.preflight``)."""
    unit_waits: dict[str, datetime] = Field(default_factory=dict)
    """Workload units (by their first node) waiting for one of their nodes that cannot start now
    (NotReady, busy): since when (the wait's bound, ``refusals.UNIT_WAIT``, counts from there). A
    unit leaves it when none of its nodes is left pending."""
    _since_0_1_0 = added_fields("held_for_workloads", "spared", "unit_waits")

    @property
    def rollout_since(self) -> datetime:
        return self.since or self.started_at

    def scope(self, name: str) -> ScopeState | None:
        if name == self.gates.name:
            return self.gates
        return next((s for s in self.compartments if s.name == name), None)


class Phase(StrEnum):
    PROGRESSING = "Progressing"
    WAITING = "Waiting"
    BLOCKED = "Blocked"
    PAUSED = "Paused"
    HALTED = "Halted"
    COMPLETE = "Complete"
    ROLLING_BACK = "RollingBack"
    """The failure rule fired with ``action: rollback``: the nodes the rollout changed are being
    returned to what they carried before."""
    ROLLED_BACK = "RolledBack"
    """Every node the rollout changed carries again what it had before; waits for a new spec."""


class NodeStart(Frozen):
    """A node to start now, with the work its node workflow must run."""

    node: str
    scope: str
    compartment: str
    batch: int
    work: NodeWork
    expected_seconds: int
    regate: bool = False
    """A rollback returns a node that failed its health gate (``NodeObservation.gate_failed``):
    its node workflow keeps the node cordoned and runs the node gate on the returned version."""
    _since_0_1_0 = added_fields("regate")


class BlockedNode(Frozen):
    node: str
    reason: str


class Counts(Frozen):
    targeted: int = 0
    needs_work: int = 0
    running: int = 0
    updated: int = 0
    failed: int = 0
    pending: int = 0
    blocked: int = 0
    """Nodes that need work and cannot start until something outside the rollout changes."""
    waiting: int = 0
    """Nodes that need work and start by themselves later (the rollout's own work holds the
    budget, or a window opens): a healthy rollout has many."""
    unavailable: int = 0
    max_unavailable: int = 0
    unproven: int = 0
    """Targeted nodes that carry the target's packages but are running (at their node gate) or
    failed (their gate failed): not updated yet, though they need no more stages. Always 0 where
    no node gate runs (a policy without one, a rollback), so the previous release reads it."""
    spared: int = 0
    """Nodes whose preflight passed: recorded at the target, never cordoned. 0 without preflight."""
    _since_0_1_0 = added_fields("unproven", "spared")


MAX_BLOCKED_LISTED = 200


class FleetGateOutcome(Frozen):
    """A fleet gate reached ``outcome`` in this decision: Failed (the failure rule fires),
    Inconclusive or MonitoringUnavailable (a hold began), Successful (a soak's gate passed, or a
    run of a batches step's check). What ``fleetwright_health_gates_total`` counts for fleet
    gates."""

    step: str
    """The kind of step whose gate it is: ``soak`` or ``batches``."""
    outcome: CheckPhase


class Decision(Frozen):
    state: RolloutState
    start: tuple[NodeStart, ...] = ()
    phase: Phase
    message: str
    wake_at: datetime | None = None
    """Call ``decide`` again at this time even if nothing else happens (soak end, approval timeout,
    a window opening)."""
    blocked: tuple[BlockedNode, ...] = ()
    """Nodes that need work but cannot start until something outside the rollout changes, and why
    (first ``MAX_BLOCKED_LISTED``)."""
    blocked_reasons: dict[str, int] = Field(default_factory=dict)
    """How many nodes are blocked per reason kind (the text before ':')."""
    waiting: tuple[BlockedNode, ...] = ()
    """Nodes that need work and will start by themselves (budget held by this rollout's own work,
    a window to open), and why (first ``MAX_BLOCKED_LISTED``)."""
    watch_fleet: bool = True
    """Something besides this rollout's node reports, its controls and ``wake_at`` can change the
    decision: a blocked node, budget held by a node that does not report here, a soak health gate
    watching its nodes, nodes still running for an earlier target. Only then does the workflow
    re-observe the fleet on the interval while it waits."""
    counts: Counts = Counts()
    fleet_gates: tuple[FleetGateOutcome, ...] = ()
    """The fleet-gate outcomes this decision reached (none without fleet gates)."""
    _since_0_1_0 = added_fields("fleet_gates")
