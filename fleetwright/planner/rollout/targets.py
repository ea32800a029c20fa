"""One ``decide`` call's read-only view of the fleet: each targeted node's work, its compartment,
the rollout order (and the workload units that start together), and what already makes nodes
unavailable. Built from the spec and the observations only; no I/O.

``Prepared`` is the expensive part (per-node work, compartments, order). It depends only on the
spec and on the nodes' names, labels, workloads and recorded package state, so a caller may build
it once and pass it to several ``decide`` calls while those do not change (the plan preview does).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from fleetwright.planner.node.state import record_key
from fleetwright.planner.node.work import NodeWork, PackageMemo, plan_node
from fleetwright.planner.policy.model import DEFAULT_COMPARTMENT, Budget, RolloutPolicy
from fleetwright.planner.rollout.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.rollout.ordering import OrderInput, WorkloadOrder, order_by_workloads
from fleetwright.planner.rollout.rollback import plan_node_rollback
from fleetwright.planner.rollout.spec import RolloutSpec


def plan_fleet(spec: RolloutSpec, observations: Observations) -> dict[str, NodeWork]:
    """Every observed node's work toward ``spec`` (a rollback's: back from it). Nodes of one fleet
    share few distinct recorded states: each distinct state is planned once, each distinct package
    record once."""
    graph = spec.graph
    memo = PackageMemo()
    planned: dict[Hashable, NodeWork] = {}
    out: dict[str, NodeWork] = {}
    for node in observations.nodes:
        records = node.packages
        key: Hashable = node.packages_key
        if key is None:
            key = tuple((name, record_key(records[name])) for name in sorted(records))
        work = planned.get(key)
        if work is None:
            if spec.rollback is not None:
                work = planned[key] = plan_node_rollback(spec, records)
            else:
                work = planned[key] = plan_node(graph, records, memo)
        out[node.name] = work
    return out


def assign_compartments(policy: RolloutPolicy, nodes: Mapping[str, NodeObservation]) -> dict[str, str]:
    """Each node's compartment. A node matching several takes the safest: the smallest cap, then the
    name; a node matching none is in ``default``."""
    matches: dict[str, list[str]] = {
        c.name: [n for n, obs in nodes.items() if c.selector.matches(obs.labels)] for c in policy.compartments
    }
    caps = {
        c.name: (c.max_unavailable or policy.max_unavailable).resolve(len(matches[c.name]))
        for c in policy.compartments
    }
    chosen: dict[str, str] = dict.fromkeys(nodes, DEFAULT_COMPARTMENT)
    ranked = sorted(policy.compartments, key=lambda c: (caps[c.name], c.name), reverse=True)
    # Assign from the least to the most safe, so the safest match is written last and wins.
    for compartment in ranked:
        for node in matches[compartment.name]:
            chosen[node] = compartment.name
    return chosen


class Prepared:
    def __init__(self, spec: RolloutSpec, observations: Observations) -> None:
        self.spec = spec
        nodes = {node.name: node for node in observations.nodes}
        self.work = plan_fleet(spec, observations)
        policy = spec.policy
        self.compartment_of = assign_compartments(policy, nodes)
        self.members: dict[str, list[str]] = {DEFAULT_COMPARTMENT: []}
        for compartment in policy.compartments:
            self.members[compartment.name] = []
        for name in nodes:
            self.members[self.compartment_of[name]].append(name)
        self.cap = policy.max_unavailable.resolve(len(nodes))
        self.compartment_caps = {
            name: self._budget(name).resolve(len(members)) for name, members in self.members.items()
        }
        self.ordering = self._order(nodes)
        self.order = self.ordering.order
        self.rank = {name: index for index, name in enumerate(self.order)}
        for members in self.members.values():
            members.sort(key=self.rank.__getitem__)
        # A corrupt record must stop work on that node only: it is never started, and the rest of
        # the fleet proceeds without it.
        self.unreadable = {n: o.unreadable for n, o in nodes.items() if o.unreadable is not None}
        self.needing = {n for n, w in self.work.items() if w.needs_work and n not in self.unreadable}
        self.failed_earlier = {n: w.failed for n, w in self.work.items() if w.failed is not None}
        # A rollback that cannot know what a package returns to holds its node as blocked.
        self.not_returned = (
            {n: "; ".join(b.reason for b in w.blocked) for n, w in self.work.items() if w.blocked}
            if spec.rollback is not None
            else {}
        )
        self.seconds: dict[str, int] = {}

    def _order(self, nodes: Mapping[str, NodeObservation]) -> WorkloadOrder:
        """The rollout order; with workloads known, units never larger than what may be
        unavailable at once in their compartment."""
        caps = {name: min(self.cap, cap) for name, cap in self.compartment_caps.items()}
        inputs = [
            OrderInput(n, o.labels, tuple(w.name for w in o.workloads), self.compartment_of[n])
            for n, o in nodes.items()
        ]
        return order_by_workloads(inputs, caps, self.spec.policy.spread_key)

    def _budget(self, name: str) -> Budget:
        compartment = self.spec.policy.compartment(name)
        if compartment is not None and compartment.max_unavailable is not None:
            return compartment.max_unavailable
        return self.spec.policy.max_unavailable


def unavailable_because(node: NodeObservation) -> str:
    """Why a node counts against maxUnavailable when this profile is not working on it."""
    if not node.ready:
        return "not Ready"
    if node.unschedulable:
        return "cordoned by someone else"
    if node.own_cordon and not node.disruptions:
        return "left cordoned by this profile (its change failed)"
    return "; ".join(node.disruptions)


class FleetView:
    def __init__(
        self, spec: RolloutSpec, observations: Observations, prepared: Prepared | None = None
    ) -> None:
        self.spec = spec
        self.prepared = prepared if prepared is not None else Prepared(spec, observations)
        p = self.prepared
        self.nodes: dict[str, NodeObservation] = {}
        self.foreign_unavailable: dict[str, str] = {}
        """node -> why it is unavailable for a reason other than this profile's work."""
        self.reported_running: set[str] = set()
        # One pass: this runs on every decision, over every targeted node.
        for node in observations.nodes:
            name = node.name
            self.nodes[name] = node
            if not node.ready or node.unschedulable or node.disruptions or node.own_cordon:
                self.foreign_unavailable[name] = unavailable_because(node)
            if node.run is RunStatus.RUNNING:
                self.reported_running.add(name)
        self.work = p.work
        self.compartment_of = p.compartment_of
        self.members = p.members
        self.order = p.order
        self.rank = p.rank
        self.cap = p.cap
        self.compartment_caps = p.compartment_caps

    def expected_seconds(self, node: str) -> int:
        seconds = self.prepared.seconds.get(node)
        if seconds is None:
            seconds = self.spec.durations.node_seconds(self.work[node])
            self.prepared.seconds[node] = seconds
        return seconds

    def needs_work(self, node: str) -> bool:
        return node in self.prepared.needing

    def node_refusal(self, node: str) -> str | None:
        """Why the node itself cannot start now (budget and windows aside)."""
        obs = self.nodes[node]
        if not obs.ready:
            return "NotReady: the node is not Ready"
        if obs.disruptions:
            return f"Busy: {', '.join(obs.disruptions)}"
        if obs.sequencing_hold:
            return obs.sequencing_hold
        if obs.waiting_on:
            return f"WaitingFor: earlier profiles {', '.join(obs.waiting_on)}"
        return None
