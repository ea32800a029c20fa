"""The runtime-required taint, decided purely: whether a joining node gets it, and which profiles
still hold it on a node (it comes off once that list is empty).

A node carries ``fleetwright.io/runtime-required:NoSchedule`` until every ``runtimeRequired``
profile that targets it is complete there: its recorded package state needs no more work (and
has no failure). Profiles being deleted no longer hold it. A joining node gets it at admission
(the webhook's Node CREATE mutation) and, should the webhook be unreachable, from the controller
when it sees the node; both ask ``taint_on_join``. Must not do I/O: callers pass the node's
labels and annotations and the profiles they read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from fleetwright.api.keys import RUNTIME_REQUIRED_TAINT, state_key
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.errors import InvalidSpecError
from fleetwright.planner import convert
from fleetwright.planner.node.packages import PackageGraph
from fleetwright.planner.node.state import read_profile_state
from fleetwright.planner.node.work import plan_node


def runtime_taint() -> dict[str, str]:
    """The taint itself, as a Node's ``spec.taints`` spells it (a fresh dict each time)."""
    return {"key": RUNTIME_REQUIRED_TAINT, "value": "true", "effect": "NoSchedule"}


def carries(taints: Iterable[Mapping[str, object]]) -> bool:
    """Whether a Node's ``spec.taints`` hold the runtime-required taint (whatever its value)."""
    return any(t.get("key") == RUNTIME_REQUIRED_TAINT for t in taints)


def _live(profiles: Iterable[NodeProfile]) -> list[NodeProfile]:
    return sorted(
        (p for p in profiles if p.metadata.deletion_timestamp is None), key=lambda p: p.metadata.name
    )


def complete_on(profile: NodeProfile, annotations: Mapping[str, str]) -> bool:
    """Whether the node's recorded state holds every package of ``profile``."""
    graph = PackageGraph(tuple(convert.package(p) for p in profile.spec.packages))
    return complete_with(graph, profile.metadata.name, annotations)


class Standing(StrEnum):
    """Where a profile stands on one node, from its recorded state."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    """A stage failed there, or the record cannot be read: only a human moves it on."""


def standing(graph: PackageGraph, profile: str, annotations: Mapping[str, str]) -> Standing:
    """Where ``profile`` stands on the node towards ``graph``. A record that cannot be read is
    failed (not complete): later profiles wait and the taint holds, while that profile's own
    rollout reports the record as blocked."""
    try:
        records = read_profile_state(annotations, profile).packages
    except InvalidSpecError:
        return Standing.FAILED
    work = plan_node(graph, records)
    if work.failed is not None:
        return Standing.FAILED
    return Standing.INCOMPLETE if work.needs_work or work.blocked else Standing.COMPLETE


def complete_with(graph: PackageGraph, profile: str, annotations: Mapping[str, str]) -> bool:
    """Whether ``profile``'s recorded state on the node needs no work towards ``graph``."""
    return standing(graph, profile, annotations) is Standing.COMPLETE


def holding_taint(
    labels: Mapping[str, str], annotations: Mapping[str, str], profiles: Iterable[NodeProfile]
) -> tuple[str, ...]:
    """The runtime-required profiles targeting the node that are not complete on it yet."""
    return tuple(
        p.metadata.name
        for p in _live(profiles)
        if p.spec.runtime_required and convert.targets(p, labels) and not complete_on(p, annotations)
    )


def taint_on_join(
    labels: Mapping[str, str], annotations: Mapping[str, str], profiles: Iterable[NodeProfile]
) -> tuple[str, ...]:
    """The ``autoTaintNewNodes`` profiles that want a node joining with these labels tainted: they
    target it, and have recorded nothing on it yet (a node re-registering keeps its history)."""
    return tuple(
        p.metadata.name
        for p in _live(profiles)
        if p.spec.runtime_required
        and p.spec.auto_taint_new_nodes
        and convert.targets(p, labels)
        and state_key(p.metadata.name) not in annotations
        and not complete_on(p, annotations)
    )
