"""One ``decide`` call's read-only view of the fleet: each targeted node's work, its compartment,
the rollout order, and what already makes nodes unavailable. Built from the spec and the
observations only; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwright.planner.nodework import NodeWork, plan_node
from fleetwright.planner.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.ordering import order_nodes
from fleetwright.planner.policy import DEFAULT_COMPARTMENT, Budget, RolloutPolicy
from fleetwright.planner.spec import RolloutSpec


def plan_fleet(spec: RolloutSpec, observations: Observations) -> dict[str, NodeWork]:
    """Every observed node's work toward ``spec`` (the expensive part; callers may reuse it while
    the recorded package state does not change)."""
    graph = spec.graph
    return {node.name: plan_node(graph, node.name, node.packages) for node in observations.nodes}


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


class FleetView:
    def __init__(
        self, spec: RolloutSpec, observations: Observations, work: Mapping[str, NodeWork] | None = None
    ) -> None:
        self.spec = spec
        self.nodes = {node.name: node for node in observations.nodes}
        self.work = dict(work) if work is not None else plan_fleet(spec, observations)
        policy = spec.policy
        self.compartment_of = assign_compartments(policy, self.nodes)
        self.members: dict[str, list[str]] = {DEFAULT_COMPARTMENT: []}
        for compartment in policy.compartments:
            self.members[compartment.name] = []
        self.order = order_nodes(((n, o.labels) for n, o in self.nodes.items()), policy.spread_key)
        for name in self.order:
            self.members[self.compartment_of[name]].append(name)
        self.cap = policy.max_unavailable.resolve(len(self.nodes))
        self.compartment_caps = {
            name: self._compartment_budget(name).resolve(len(members))
            for name, members in self.members.items()
        }
        self.foreign_unavailable = {
            n for n, o in self.nodes.items() if not o.ready or o.unschedulable or o.disruptions
        }
        self.reported_running = {n for n, o in self.nodes.items() if o.run is RunStatus.RUNNING}
        self._seconds: dict[str, int] = {}

    def _compartment_budget(self, name: str) -> Budget:
        compartment = self.spec.policy.compartment(name)
        if compartment is not None and compartment.max_unavailable is not None:
            return compartment.max_unavailable
        return self.spec.policy.max_unavailable

    def expected_seconds(self, node: str) -> int:
        seconds = self._seconds.get(node)
        if seconds is None:
            seconds = self.spec.durations.node_seconds(self.work[node])
            self._seconds[node] = seconds
        return seconds

    def needs_work(self, node: str) -> bool:
        work = self.work.get(node)
        return work is not None and work.needs_work

    def node_refusal(self, node: str) -> str | None:
        """Why the node itself cannot start now (budget and windows aside)."""
        obs = self.nodes[node]
        if not obs.ready:
            return "NotReady: the node is not Ready"
        if obs.disruptions:
            return f"Busy: {', '.join(obs.disruptions)}"
        if obs.waiting_on:
            return f"WaitingFor: earlier profiles {', '.join(obs.waiting_on)}"
        return None
