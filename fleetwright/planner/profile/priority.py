"""Priority among profiles sharing a node: a profile starts work on a node only once every
earlier profile (lower ``priority``, ties by name) that targets the node is complete there
(``sequencing: node``), or complete on every node it targets (``sequencing: all``). The results
fill ``NodeObservation.waiting_on`` and ``NodeObservation.sequencing_hold``, which the planner
turns into blocks. Pure: callers pass the profiles and the nodes' labels/annotations.

``sequencing: all`` turns one bad node of an earlier profile into a wait on every shared node (with
``runtimeRequired``, the taint stays on all of them). Such a wait is never silent: its reason says
whether the earlier profile is still working (``WaitingFor``), failed on a node
(``EarlierProfileFailed``), is blocked on a node by its own rollout (``EarlierProfileBlocked``), or
has stopped with nodes left incomplete, e.g. a node it skipped (``EarlierProfileStopped``).

Profiles being deleted do not hold later ones back (their removal is not a prerequisite).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleetwright.api.nodeprofile import NodeIssue, NodeProfile
from fleetwright.planner import convert
from fleetwright.planner.node.packages import PackageGraph
from fleetwright.planner.profile.runtime import Standing, complete_with, standing


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


# The earlier profile's own rollout will not move these nodes on by itself in these phases.
STOPPED_PHASES = frozenset({"Complete", "Degraded", "Halted", "Aborted", "Paused"})
NODES_NAMED = 5


@dataclass(frozen=True)
class FleetCompletion:
    """An earlier profile that is not complete on every node it targets."""

    earlier: Earlier
    incomplete: tuple[str, ...]
    """Targeted nodes where it is not complete, failed ones included, sorted."""
    failed: tuple[str, ...] = field(default=())
    """Those where a stage failed or the record cannot be read."""

    def reason(self, runtime_required: bool) -> str:
        """Why ``sequencing: all`` holds a later profile back (``<Reason>: <message>``)."""
        profile = self.earlier.profile
        name = profile.metadata.name
        status = profile.status
        current = status is not None and status.observed_generation == profile.metadata.generation
        issues = {i.node: _issue(i) for i in status.node_issues} if status is not None and current else {}
        blocked = [f"{n} ({issues[n]})" for n in self.incomplete if n in issues and n not in self.failed]
        if self.failed:
            reason = f"EarlierProfileFailed: {name} failed on {_names(self.failed)}"
        elif blocked:
            reason = f"EarlierProfileBlocked: {name} is blocked on {_names(blocked)}"
        elif status is not None and current and status.phase in STOPPED_PHASES:
            reason = (
                f"EarlierProfileStopped: {name} is {status.phase} with {_names(self.incomplete)} not complete"
            )
        else:
            left = _names(self.incomplete)
            return f"WaitingFor: earlier profile {name} on all its nodes ({left} not complete)"
        reason += f"; sequencing: all waits until {name} is complete on all its nodes"
        if runtime_required:
            reason += ", and this node keeps the runtime-required taint meanwhile"
        return reason


def _issue(issue: NodeIssue) -> str:
    """The reason of a node issue: its message's leading ``<Reason>:`` (a blocked node's message is
    the rollout's block reason), else the issue's own reason."""
    head, colon, _ = issue.message.partition(":")
    return head if colon and head.isalnum() else issue.reason


def _names(nodes: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(nodes[:NODES_NAMED])
    more = len(nodes) - NODES_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def fleet_completion(
    earlier: Iterable[Earlier], nodes: Iterable[tuple[str, Mapping[str, str], Mapping[str, str]]]
) -> tuple[FleetCompletion, ...]:
    """The earlier profiles not complete on every node they target, in priority order, from every
    node's ``(name, labels, annotations)``."""
    fleet = sorted(nodes, key=lambda n: n[0])
    out: list[FleetCompletion] = []
    for e in earlier:
        name = e.profile.metadata.name
        stood = [
            (n, standing(e.graph, name, annotations))
            for n, labels, annotations in fleet
            if convert.targets(e.profile, labels)
        ]
        incomplete = tuple(n for n, s in stood if s is not Standing.COMPLETE)
        if incomplete:
            out.append(FleetCompletion(e, incomplete, tuple(n for n, s in stood if s is Standing.FAILED)))
    return tuple(out)


def sequencing_hold(
    profile: NodeProfile, incomplete: Iterable[FleetCompletion], labels: Mapping[str, str]
) -> str | None:
    """Why ``profile`` (``sequencing: all``) may not start on a node with ``labels``: the first
    earlier profile sharing the node that is not complete on all its nodes; None when there is none
    or the profile sequences per node."""
    if profile.spec.sequencing != "all":
        return None
    for completion in incomplete:
        if convert.targets(completion.earlier.profile, labels):
            return completion.reason(profile.spec.runtime_required)
    return None
