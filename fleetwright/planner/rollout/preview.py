"""Plan preview: what a rollout would do, by running ``decide`` against a simulated fleet in which
every node succeeds after its expected duration, approvals are granted when asked for and health
gates hold. Produces the batches (with the workloads each interrupts and the GPU-hours they are
expected to lose), each node's stages, drains and reboots, the nodes blocked and why, and an ETA.
The same engine as the real rollout, so the preview cannot drift from it. Since no node fails in
it, it also says, from the policy and the fleet alone, where tolerated failures would fill a budget
before the failure rule fires by count (``deadlocks``).

Pure: takes the observations and ``now``; nothing is started anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from pydantic import Field

from fleetwright.api.health import ResolvedGate
from fleetwright.planner.base import Frozen
from fleetwright.planner.health.analysis import CheckPhase, Measurement, ScopedMeasurement
from fleetwright.planner.node.preflight import preflight_count
from fleetwright.planner.node.work import NodeWork
from fleetwright.planner.policy.model import (
    DEFAULT_COMPARTMENT,
    GATES_SCOPE,
    ApprovalStep,
    BatchesStep,
    FailurePolicy,
    SoakStep,
    Step,
)
from fleetwright.planner.rollout import fleetgate
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.state import BlockedNode, Decision, NodeStart, Phase, RolloutState
from fleetwright.planner.rollout.targets import Prepared

MAX_ROUNDS = 100_000
LARGE_FLEET = 2000


def resolution_for(nodes: int) -> timedelta:
    """Finishes are rounded up to this grid, which bounds the number of decisions the simulation
    needs; the ETA errs late by less than one step per batch. Coarser for large fleets, where a
    decision costs more."""
    return timedelta(minutes=1 if nodes <= LARGE_FLEET else 5)


ASSUMPTIONS = (
    "every node succeeds and takes its expected duration (per-stage estimates)",
    "approval gates are granted as soon as they are reached",
    "soak health gates hold and every health check measures Successful",
    "no other disruption starts or ends during the rollout",
)


class PlannedNode(Frozen):
    node: str
    compartment: str
    scope: str
    batch: int
    """0: canary; n: the n-th batch of its compartment."""
    start: datetime
    end: datetime
    expected_seconds: int
    steps: tuple[str, ...]
    """``package:stage`` in order; the merged interrupt reads ``interrupt(reboot):a,b``."""
    interrupt: str
    drain: bool
    reboot: bool


class PlannedBatch(Frozen):
    compartment: str
    scope: str
    number: int
    nodes: tuple[str, ...]
    start: datetime
    end: datetime
    workloads: tuple[str, ...] = ()
    """The workloads this batch interrupts: those with pods on its nodes."""
    gpu_hours: float = 0.0
    """Expected GPU-hours those workloads lose: each one's GPUs (on all its nodes: a gang stops as a
    whole) x the time from its first node's start to its last node's end in this batch."""


class Plan(Frozen):
    profile: str
    target: str
    rollback_of: str | None = None
    """Set on a rollback's plan: the target of the rollout it returns (``fleetwright plan
    --rollback``)."""
    generated_at: datetime
    max_unavailable: int
    targeted: int
    needs_work: int
    drains: int
    reboots: int
    batches: tuple[PlannedBatch, ...] = ()
    nodes: tuple[PlannedNode, ...] = ()
    blocked: tuple[BlockedNode, ...] = ()
    phase: Phase
    message: str
    eta: datetime | None = None
    """When the last reachable node finishes; blocked nodes are not included."""
    assumptions: tuple[str, ...] = ASSUMPTIONS
    approvals: tuple[str, ...] = Field(default=())
    """Approval gates the rollout will stop at (granted immediately in this preview)."""
    resolution_seconds: int = 60
    """Node finishes were rounded up to this grid (the ETA errs late by up to this much per batch)."""
    deadlocks: tuple[str, ...] = ()
    """Where the failure rule tolerates as many failed nodes as a budget holds: left cordoned, they
    would fill it and no node could start (the rollout then fires the rule: docs/status.md)."""
    workloads: int = 0
    """Workloads running on the targeted nodes (0: none known, the order ignores workloads)."""
    gpu_hours_lost: float = 0.0
    """The batches' ``gpu_hours`` summed (a restart's own cost not included)."""
    images: dict[str, str] = Field(default_factory=dict)
    """With ``--resolve-images``: each package image reference -> the digest its registry serves
    now (what a generation starting now would pin), or ``unresolved: <why>``."""
    notes: tuple[str, ...] = ()
    """What the order says about workloads larger than the cap (consecutive batches)."""
    node_gate: tuple[str, ...] = ()
    """The node gate's checks, each with its schedule and limits (its time is in each node's)."""
    preflight: int = 0
    """Nodes that will run their checks in service before any cordon (the policy's ``preflight``):
    how many of them pass, and are spared, is known only when they run."""
    fleet_gate: tuple[str, ...] = ()
    """``<scope>/<step>`` of each soak or batches step with fleet-gate checks, and each check with
    its schedule and limits (the simulation takes them as passing)."""


def describe_steps(work: NodeWork) -> tuple[str, ...]:
    out = []
    for step in work.steps:
        if step.interrupt is not None:
            out.append(f"{step.stage.value}({step.interrupt.describe()}):{','.join(step.packages)}")
        else:
            out.append(f"{step.packages[0]}:{step.stage.value}")
    return tuple(out)


def approval_ids(spec: RolloutSpec) -> tuple[str, ...]:
    policy = spec.policy
    ids = [f"{GATES_SCOPE}/{s.name}" for s in policy.gate_steps() if isinstance(s, ApprovalStep)]
    for name in sorted({"default", *(c.name for c in policy.compartments)}):
        steps: tuple[Step, ...] = policy.compartment_steps(name)
        ids += [f"{name}/{s.name}" for s in steps if isinstance(s, ApprovalStep)]
    return tuple(ids)


class _Simulation:
    def __init__(self, spec: RolloutSpec, observations: Observations, now: datetime) -> None:
        self.spec = spec
        self.prepared = Prepared(spec, observations)
        self.work = self.prepared.work
        self.nodes: dict[str, NodeObservation] = {n.name: n for n in observations.nodes}
        self.approvals = approval_ids(spec)
        self.base = observations
        self.now = now
        self.start = now
        self.resolution = resolution_for(len(self.nodes))
        self.finish: dict[str, datetime] = {}
        self.planned: list[PlannedNode] = []

    def observations(self) -> Observations:
        return self.base.model_copy(
            update={"nodes": tuple(self.nodes.values()), "approvals": self.approvals, "paused": False}
        )

    def record(self, start: NodeStart) -> None:
        end = self.now + timedelta(seconds=start.expected_seconds)
        self.finish[start.node] = self._rounded(end)
        self.nodes[start.node] = self.nodes[start.node].model_copy(update={"run": RunStatus.RUNNING})
        work = start.work
        self.planned.append(
            PlannedNode(
                node=start.node,
                compartment=start.compartment,
                scope=start.scope,
                batch=start.batch,
                start=self.now,
                end=end,
                expected_seconds=start.expected_seconds,
                steps=describe_steps(work),
                interrupt=work.interrupt.describe(),
                drain=work.needs_drain,
                reboot=work.needs_reboot,
            )
        )

    def _rounded(self, when: datetime) -> datetime:
        steps = -(-(when - self.start) // self.resolution)  # ceiling division of timedeltas
        return self.start + steps * self.resolution

    def advance(self, wake: datetime | None) -> bool:
        """Move time to the next event; False when nothing will ever happen again."""
        events = list(self.finish.values()) + ([wake] if wake is not None else [])
        if not events:
            return False
        self.now = max(self.now, min(events))
        for node, end in list(self.finish.items()):
            if end <= self.now:
                self.nodes[node] = self.nodes[node].model_copy(update={"run": RunStatus.SUCCEEDED})
                del self.finish[node]
        return True


def deadlocks(spec: RolloutSpec, prepared: Prepared) -> tuple[str, ...]:
    """Each budget (profile-wide, every compartment's) that the failures its failure rule tolerates
    could fill: a node whose change drains it stays cordoned when the change fails there and counts
    against maxUnavailable until a human acts, so with that many failed, no node the budget caps
    could start, and the rule would never fire by count (0.1.0 stayed Blocked for good)."""
    policy = spec.policy
    needing = prepared.needing
    scopes: list[tuple[str, int, FailurePolicy, set[str]]] = [
        ("maxUnavailable", prepared.cap, policy.failure, set(needing))
    ]
    if policy.compartments:
        for name, members in sorted(prepared.members.items()):
            rule = policy.failure_for(name) if name != DEFAULT_COMPARTMENT else policy.failure
            cap = prepared.compartment_caps[name]
            scopes.append((f"compartment {name} maxUnavailable", cap, rule, needing.intersection(members)))
    found: list[str] = []
    for budget, cap, rule, nodes in scopes:
        tolerated = rule.max_failed_nodes
        drained = sum(1 for n in nodes if prepared.work[n].needs_drain)
        if tolerated is None or tolerated < cap or len(nodes) <= cap or drained < cap:
            continue
        found.append(
            f"{budget} {cap}: once {cap} nodes fail (maxFailedNodes {tolerated} tolerates them) they stay "
            f"cordoned and hold it, {len(nodes) - cap} node(s) cannot start and the rule cannot fire by "
            f"count; the rollout fires {rule.action.value} then"
        )
    return tuple(found)


def preview(spec: RolloutSpec, observations: Observations, now: datetime) -> Plan:
    watched = fleet_gates(spec)
    # Checks that pass change nothing while batches run: simulating their measurements would only
    # add decisions.
    spec = spec.model_copy(update={"policy": spec.policy.without_background_checks()})
    sim = _Simulation(spec, observations, now)
    state = begin(spec, now)
    decision: Decision | None = None
    for _ in range(MAX_ROUNDS):
        decision = decide(state, _passing(sim.observations(), state, sim.now), sim.now, sim.prepared)
        for start in decision.start:
            sim.record(start)
        state = decision.state
        if decision.phase in (Phase.COMPLETE, Phase.HALTED, Phase.ROLLED_BACK):
            break
        if not sim.advance(decision.wake_at):
            break
    assert decision is not None
    return _plan(spec, sim, decision, now).model_copy(update={"fleet_gate": watched})


def with_node_gate(plan: Plan, gate: ResolvedGate) -> Plan:
    """``plan`` with the node gate's validations, checks and external validators named; a node
    the gate validates is cordoned and drained whatever its interrupt (its validations need it to
    themselves), so every node that needs work counts as drained."""
    named = (
        tuple(f"validation {v.describe()}" for v in gate.validations)
        + tuple(c.describe() for c in gate.checks)
        + tuple(v.describe() for v in gate.external)
    )
    if not gate.validations:
        return plan.model_copy(update={"node_gate": named})
    drained = tuple(n.model_copy(update={"drain": True}) for n in plan.nodes)
    return plan.model_copy(update={"node_gate": named, "nodes": drained, "drains": plan.needs_work})


def fleet_gates(spec: RolloutSpec) -> tuple[str, ...]:
    """Each soak's and batches step's fleet-gate checks, with their schedule and limits."""
    policy = spec.policy
    scoped = [(GATES_SCOPE, s) for s in policy.gate_steps()]
    for name in sorted({DEFAULT_COMPARTMENT, *(c.name for c in policy.compartments)}):
        scoped += [(name, s) for s in policy.compartment_steps(name)]
    out = []
    for scope, step in scoped:
        if isinstance(step, SoakStep | BatchesStep):
            when = "during the soak" if isinstance(step, SoakStep) else "in runs while the batches run"
            out += [f"{scope}/{step.name} ({when}) {c.describe()}" for c in step.checks]
    return tuple(out)


def _passing(observations: Observations, state: RolloutState, now: datetime) -> Observations:
    """``observations`` with every fleet-gate measurement due at ``now`` taken, and Successful."""
    due = fleetgate.due(state, now)
    if not due:
        return observations
    measured = tuple(
        ScopedMeasurement(
            scope=d.scope,
            step=d.step,
            measurement=Measurement(check=d.check.name, phase=CheckPhase.SUCCESSFUL),
        )
        for d in due
    )
    return observations.model_copy(update={"fleet_measurements": measured})


def _plan(spec: RolloutSpec, sim: _Simulation, last: Decision, now: datetime) -> Plan:
    needing = [w for w in sim.work.values() if w.needs_work]
    # Nodes still blocked at the end are the ones the rollout cannot reach; the rest were blocked
    # only for a while (budget, windows), which the batch times already show.
    blocked = last.blocked
    ends = [p.end for p in sim.planned]
    batches = _batches(sim.planned, sim.nodes)
    return Plan(
        profile=spec.profile,
        target=spec.target,
        rollback_of=spec.rollback.target if spec.rollback is not None else None,
        generated_at=now,
        max_unavailable=last.counts.max_unavailable,
        targeted=len(sim.work),
        needs_work=len(needing),
        drains=sum(1 for w in needing if w.needs_drain),
        reboots=sum(1 for w in needing if w.needs_reboot),
        batches=batches,
        nodes=tuple(sim.planned),
        blocked=blocked,
        phase=last.phase,
        message=last.message,
        eta=max(ends) if ends else None,
        approvals=sim.approvals,
        resolution_seconds=int(sim.resolution.total_seconds()),
        deadlocks=deadlocks(spec, sim.prepared),
        workloads=len({w.name for o in sim.nodes.values() for w in o.workloads}),
        gpu_hours_lost=round(sum(b.gpu_hours for b in batches), 1),
        notes=sim.prepared.ordering.notes,
        preflight=preflight_count(needing, enabled=spec.policy.preflight),
    )


def _batches(planned: list[PlannedNode], nodes: Mapping[str, NodeObservation]) -> tuple[PlannedBatch, ...]:
    groups: dict[tuple[str, str, int], list[PlannedNode]] = {}
    for node in planned:
        groups.setdefault(
            (node.scope, node.compartment if node.batch else node.scope, node.batch), []
        ).append(node)
    gpus: dict[str, int] = {}
    for observation in nodes.values():
        for workload in observation.workloads:
            gpus[workload.name] = gpus.get(workload.name, 0) + workload.gpus
    batches = [
        PlannedBatch(
            compartment=compartment,
            scope=scope,
            number=number,
            nodes=tuple(n.node for n in members),
            start=min(n.start for n in members),
            end=max(n.end for n in members),
            workloads=tuple(sorted(spans)),
            gpu_hours=_gpu_hours(spans, gpus),
        )
        for (scope, compartment, number), members in groups.items()
        for spans in [_spans(members, nodes)]
    ]
    return tuple(sorted(batches, key=lambda b: (b.start, b.compartment, b.number)))


def _spans(
    members: list[PlannedNode], nodes: Mapping[str, NodeObservation]
) -> dict[str, tuple[datetime, datetime]]:
    """Each workload a batch interrupts: from its first node's start to its last node's end."""
    spans: dict[str, tuple[datetime, datetime]] = {}
    for member in members:
        for workload in nodes[member.node].workloads:
            start, end = spans.get(workload.name, (member.start, member.end))
            spans[workload.name] = (min(start, member.start), max(end, member.end))
    return spans


def _gpu_hours(spans: Mapping[str, tuple[datetime, datetime]], gpus: Mapping[str, int]) -> float:
    hours = sum(gpus[w] * (end - start).total_seconds() / 3600 for w, (start, end) in spans.items())
    return round(hours, 2)
