"""Reading a fleet snapshot (a ``kubectl get nodes -o json`` NodeList, already parsed into dicts)
into observations for one profile. Pure: the caller reads the file or the API server.

What is read from each Node:
- labels; ``Ready`` condition; other conditions (for soak health gates);
- ``spec.unschedulable``: a cordon counts as foreign unless the node carries this profile's cordon
  marker ``fleetwright.io/cordon.<profile>`` (written by the node workflow when it cordons);
- this profile's recorded package state (``nodestate``);
- other profiles' recorded state: a pending, unfailed change there means that profile is working
  on the node now, which counts against the cap and blocks a start here (``disruptions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwright.planner.nodestate import ANNOTATION_PREFIX, parse_annotation, read_profile_state
from fleetwright.planner.observations import NodeObservation

CORDON_PREFIX = "fleetwright.io/cordon."


def cordon_key(profile: str) -> str:
    return CORDON_PREFIX + profile


def _conditions(node: Mapping[str, Any]) -> dict[str, str]:
    status = node.get("status") or {}
    return {
        str(c.get("type")): str(c.get("status", "Unknown"))
        for c in status.get("conditions") or []
        if isinstance(c, Mapping) and c.get("type")
    }


def _other_profiles_busy(annotations: Mapping[str, str], profile: str) -> tuple[str, ...]:
    busy: list[str] = []
    for key, value in sorted(annotations.items()):
        if not key.startswith(ANNOTATION_PREFIX):
            continue
        state = parse_annotation(key, value)
        if state.profile == profile:
            continue
        if any(r.pending is not None and r.pending.failed is None for r in state.packages.values()):
            busy.append(f"profile/{state.profile} in progress")
    return tuple(busy)


def observe_node(node: Mapping[str, Any], profile: str) -> NodeObservation:
    meta = node.get("metadata") or {}
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    conditions = _conditions(node)
    unschedulable = bool((node.get("spec") or {}).get("unschedulable", False))
    return NodeObservation(
        name=str(meta["name"]),
        labels=dict(meta.get("labels") or {}),
        ready=conditions.get("Ready") == "True",
        unschedulable=unschedulable and cordon_key(profile) not in annotations,
        conditions=conditions,
        disruptions=_other_profiles_busy(annotations, profile),
        packages=read_profile_state(annotations, profile).packages,
    )


def node_items(node_list: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The items of a NodeList (or a single Node, or a plain list of Nodes)."""
    if node_list.get("kind") == "Node":
        return [node_list]
    items = node_list.get("items")
    if not isinstance(items, list):
        raise ValueError("not a NodeList: no 'items' list")
    return items


def observe_fleet(
    nodes: Iterable[Mapping[str, Any]],
    profile: str,
    targeted: Callable[[Mapping[str, str]], bool] | None = None,
) -> tuple[NodeObservation, ...]:
    """Observations for the nodes ``targeted(labels)`` selects (all when None), sorted by name."""
    chosen = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if targeted is None or targeted(labels):
            chosen.append(observe_node(node, profile))
    return tuple(sorted(chosen, key=lambda o: o.name))
