"""Priority among profiles sharing a node: a profile starts work on a node only once every
earlier profile (lower ``priority``, ties by name) that targets the node is complete there
(``sequencing: node``). The result fills ``NodeObservation.waiting_on``, which the planner turns
into a ``WaitingFor`` block. Pure: callers pass the profiles and the node's labels/annotations.

Profiles being deleted do not hold later ones back (their removal is not a prerequisite).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.planner import convert
from fleetwright.planner.packages import PackageGraph
from fleetwright.planner.runtime import complete_with


@dataclass(frozen=True)
class Earlier:
    """An earlier profile, with its package graph built once per turn."""

    profile: NodeProfile
    graph: PackageGraph


def order_key(profile: NodeProfile) -> tuple[int, str]:
    return (profile.spec.priority, profile.metadata.name)


def earlier_profiles(profile: NodeProfile, profiles: Iterable[NodeProfile]) -> tuple[Earlier, ...]:
    mine = order_key(profile)
    return tuple(
        Earlier(p, PackageGraph(tuple(convert.package(x) for x in p.spec.packages)))
        for p in sorted(profiles, key=order_key)
        if p.metadata.deletion_timestamp is None
        and p.metadata.name != profile.metadata.name
        and order_key(p) < mine
    )


def waiting_on(
    earlier: Iterable[Earlier], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[str, ...]:
    """The earlier profiles that target this node and are not complete on it yet."""
    return tuple(
        e.profile.metadata.name
        for e in earlier
        if convert.targets(e.profile, labels)
        and not complete_with(e.graph, e.profile.metadata.name, annotations)
    )
