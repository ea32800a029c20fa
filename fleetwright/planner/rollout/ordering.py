"""Deterministic node order: which node goes first, and which nodes start together.

Nodes are spread across a topology key (the zone by default) so the first batches touch every zone
a little rather than one zone a lot; inside a zone the order is a stable hash of the node name
(like SUC hashing UIDs), so it does not follow naming schemes that put one rack's nodes together.

When the workloads running on the nodes are known (training jobs: a gang restarts whenever any one
of its nodes is drained), ``order_by_workloads`` puts idle nodes first and a workload's nodes
together, as a unit the engine starts in one batch; zone spread only breaks ties. Same names,
labels and workloads always give the same order. No randomness, no clock.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ZONE_LABEL = "topology.kubernetes.io/zone"


def stable_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def order_nodes(nodes: Iterable[tuple[str, Mapping[str, str]]], spread_key: str = ZONE_LABEL) -> list[str]:
    """Node names in rollout order: round-robin over ``spread_key`` values (zones ordered by hash,
    nodes without the label form their own group), each zone in stable-hash order."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, labels in nodes:
        groups[labels.get(spread_key, "")].append((stable_hash(name), name))
    keyed: list[tuple[int, str, str, str]] = []
    for zone, members in groups.items():
        zone_key = stable_hash(zone)
        for rank, (name_hash, name) in enumerate(sorted(members)):
            keyed.append((rank, zone_key, name_hash, name))
    keyed.sort()
    return [name for *_, name in keyed]


@dataclass(frozen=True)
class WorkloadOrder:
    """The rollout order when workloads are known, and the units that start together."""

    order: list[str]
    units: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """node -> the nodes (itself included, in order) that must start with it; only nodes of units
    with more than one node."""
    chains: dict[str, str] = field(default_factory=dict)
    """node -> the first node of its workload, for workloads cut into pieces: a piece never starts
    before the pieces ahead of it (they stay consecutive)."""
    idle: frozenset[str] = frozenset()
    """Nodes no workload runs on (empty when nothing is known about workloads)."""
    sizes: dict[str, int] = field(default_factory=dict)
    """busy node -> how many nodes its workload covers (with the workloads sharing its nodes):
    what starting the node alone, as a canary does, costs in restarts."""
    notes: tuple[str, ...] = ()
    """Workloads larger than the cap, each said once: their nodes go in consecutive batches."""


@dataclass(frozen=True)
class OrderInput:
    name: str
    labels: Mapping[str, str]
    workloads: tuple[str, ...] = ()
    group: str = ""
    """The node's compartment: a unit never spans two (each has its own batches)."""


def order_by_workloads(
    nodes: Sequence[OrderInput], caps: Mapping[str, int], spread_key: str = ZONE_LABEL
) -> WorkloadOrder:
    """Idle nodes first (in ``order_nodes`` order), then the nodes of each workload together.

    Workloads sharing a node form one unit (draining that node stops both); a unit larger than its
    compartment's cap (``caps``) is cut, in order, into pieces of the cap: consecutive batches.
    Units go largest first (so later, smaller ones fill the room the large ones leave in a batch),
    ties in zone-spread order of their first nodes. With no workload anywhere the order is exactly
    ``order_nodes``'s."""
    base = order_nodes(((n.name, n.labels) for n in nodes), spread_key)
    if not any(n.workloads for n in nodes):
        return WorkloadOrder(order=base)
    rank = {name: index for index, name in enumerate(base)}
    by_name = {n.name: n for n in nodes}
    components = _components(nodes, rank)
    idle = [n for n in base if not by_name[n].workloads]
    busy = [c for c in components if by_name[c[0]].workloads]
    firsts = order_nodes(((c[0], by_name[c[0]].labels) for c in busy), spread_key)
    spread = {name: index for index, name in enumerate(firsts)}
    busy.sort(key=lambda c: (-len(c), spread[c[0]]))
    order = list(idle)
    units: dict[str, tuple[str, ...]] = {}
    chains: dict[str, str] = {}
    notes: list[str] = []
    sizes: dict[str, int] = {}
    for component in busy:
        sizes.update(dict.fromkeys(component, len(component)))
        cap = max(1, caps.get(by_name[component[0]].group, 1))
        if len(component) > cap:
            notes.append(_split_note(component, by_name, cap))
            chains.update(dict.fromkeys(component, component[0]))
        for start in range(0, len(component), cap):
            piece = tuple(component[start : start + cap])
            order.extend(piece)
            if len(piece) > 1:
                units.update(dict.fromkeys(piece, piece))
    return WorkloadOrder(order, units, chains, frozenset(idle), sizes, tuple(notes))


def _components(nodes: Sequence[OrderInput], rank: Mapping[str, int]) -> list[list[str]]:
    """Nodes joined by a shared workload within a compartment, each list in rollout rank order."""
    parent = {n.name: n.name for n in nodes}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    first: dict[tuple[str, str], str] = {}
    for node in nodes:
        for workload in node.workloads:
            seen = first.setdefault((workload, node.group), node.name)
            a, b = root(seen), root(node.name)
            if a != b:
                parent[max(a, b, key=rank.__getitem__)] = min(a, b, key=rank.__getitem__)
    groups: dict[str, list[str]] = defaultdict(list)
    for name in sorted(parent, key=rank.__getitem__):
        groups[root(name)].append(name)
    return list(groups.values())


def _split_note(component: Sequence[str], by_name: Mapping[str, OrderInput], cap: int) -> str:
    names = sorted({w for n in component for w in by_name[n].workloads})
    shown = names[0] + (f" (+{len(names) - 1} sharing its nodes)" if len(names) > 1 else "")
    batches = -(-len(component) // cap)
    return (
        f"workload {shown} spans {len(component)} nodes, more than maxUnavailable {cap}: "
        f"its nodes go in {batches} consecutive batches"
    )
