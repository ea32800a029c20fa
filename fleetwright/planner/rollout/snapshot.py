"""Reading a fleet snapshot (a ``kubectl get nodes -o json`` NodeList, already parsed into dicts)
into observations for one profile. Pure: the caller reads the file or the API server.

What is read from each Node:
- labels; ``Ready`` condition; other conditions (for soak health gates);
- ``spec.unschedulable``: a cordon counts as foreign unless the node carries this profile's cordon
  marker ``fleetwright.io/cordon.<profile>`` (written by the node workflow when it cordons);
- this profile's recorded package state (``node.state``);
- other profiles' recorded state: a pending, unfailed change there means that profile is working
  on the node now, which counts against the cap and blocks a start here (``disruptions``); a record
  that cannot be read counts the same (nobody can tell that profile is not mid-change there);
- a record of this profile that cannot be read leaves the node alone (``unreadable``), rather than
  failing the observation of the whole fleet or being mistaken for "nothing installed";
- other profiles' start claims ``fleetwright.io/claim.<profile>``, written when a decision starts
  the node and removed when its node workflow ends: they cover the moments between a decision and
  the cordon or the first recorded stage, so one node disrupted by any profile counts against
  every profile's budget.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwright.api.keys import (
    CLAIM_PREFIX,
    STATE_PREFIX,
    NodeReason,
    claim_key,
    condition_type,
    cordon_key,
    state_key,
)
from fleetwright.errors import InvalidSpecError
from fleetwright.planner.node.state import NodePackageState, parse_annotation
from fleetwright.planner.rollout.observations import NodeObservation


def _conditions(node: Mapping[str, Any]) -> dict[str, str]:
    status = node.get("status") or {}
    return {
        str(c.get("type")): str(c.get("status", "Unknown"))
        for c in status.get("conditions") or []
        if isinstance(c, Mapping) and c.get("type")
    }


GATE_FAILED_REASONS = frozenset({NodeReason.GATE_FAILED, NodeReason.HARDWARE_SUSPECT})
"""The reasons of a profile's node condition that say the node's health was shown bad."""


def _condition_reason(node: Mapping[str, Any], type_: str) -> str:
    for c in (node.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == type_:
            return str(c.get("reason") or "")
    return ""


_Cache = dict[tuple[str, str], NodePackageState]


def _parse(key: str, value: str, cache: _Cache) -> NodePackageState:
    # Many nodes carry byte-identical state: parse each distinct annotation once.
    state = cache.get((key, value))
    if state is None:
        state = cache[(key, value)] = parse_annotation(key, value)
    return state


def _other_profiles_busy(annotations: Mapping[str, str], profile: str, cache: _Cache) -> tuple[str, ...]:
    busy: list[str] = []
    for key, value in sorted(annotations.items()):
        if key.startswith(CLAIM_PREFIX) and key != claim_key(profile):
            busy.append(f"profile/{key.removeprefix(CLAIM_PREFIX)} starting")
            continue
        if not key.startswith(STATE_PREFIX) or key == state_key(profile):
            continue
        try:
            state = _parse(key, value, cache)
        except InvalidSpecError:
            # That profile's own rollout reports the problem; here it only means the node may be
            # mid-change for it, so it must not be disrupted by this profile as well.
            busy.append(f"{key} unreadable")
            continue
        if any(r.pending is not None and r.pending.failed is None for r in state.packages.values()):
            busy.append(f"profile/{state.profile} in progress")
    return tuple(busy)


def observe_node(node: Mapping[str, Any], profile: str, cache: _Cache | None = None) -> NodeObservation:
    cache = cache if cache is not None else {}
    meta = node.get("metadata") or {}
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    conditions = _conditions(node)
    own, unreadable = _own_state(annotations, profile, cache)
    unschedulable = bool((node.get("spec") or {}).get("unschedulable", False))
    own_cordon = unschedulable and cordon_key(profile) in annotations
    return NodeObservation(
        name=str(meta["name"]),
        labels=dict(meta.get("labels") or {}),
        ready=conditions.get("Ready") == "True",
        unschedulable=unschedulable and cordon_key(profile) not in annotations,
        own_cordon=own_cordon,
        gate_failed=own_cordon and _condition_reason(node, condition_type(profile)) in GATE_FAILED_REASONS,
        conditions=conditions,
        disruptions=_other_profiles_busy(annotations, profile, cache),
        packages=own.packages,
        packages_key=_digest(annotations.get(state_key(profile), "")),
        unreadable=unreadable,
    )


def _own_state(
    annotations: Mapping[str, str], profile: str, cache: _Cache
) -> tuple[NodePackageState, str | None]:
    """This profile's record on the node, and why it cannot be read (then the record is empty)."""
    key = state_key(profile)
    value = annotations.get(key)
    if value is None:
        return NodePackageState(profile=profile), None
    try:
        return _parse(key, value, cache), None
    except InvalidSpecError as err:
        # One line: the reason lands in a condition message and in the rollout's blocked list.
        return NodePackageState(profile=profile), " ".join(str(err).split())


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:24]


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
    cache: _Cache = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if targeted is None or targeted(labels):
            chosen.append(observe_node(node, profile, cache))
    return tuple(sorted(chosen, key=lambda o: o.name))
