"""The node condition showing that a rollout holds a node for another node of its workload unit
(``keys.unit_wait_condition_type``, status ``True``, reason ``WaitingForUnit``, the message naming
the unit, since when it waits and until when at most): which nodes carry it after a decision, and
writing or removing it.

The decision is the source: a node carries the condition while the latest decision lists it as
waiting for its unit, and loses it at the first decision that does not (the unit started, with or
without the node it waited for, or the rollout paused, halted or ended). It must not decide who
waits; the planner does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from fleetwright.activities.nodeprogress import MAX_MESSAGE
from fleetwright.api.keys import ProfileReason, unit_wait_condition_type
from fleetwright.kube import nodestatus
from fleetwright.kube.client import ApiClient
from fleetwright.kube.nodestatus import NodeStatusCondition
from fleetwright.planner.rollout.state import BlockedNode, Decision

WAITING = "True"
_PREFIX = f"{ProfileReason.WAITING_FOR_UNIT}: "


def unit_wait_changes(
    nodes: Iterable[Mapping[str, Any]],
    profile: str,
    decision: Decision,
    units: Mapping[str, tuple[str, ...]],
) -> dict[str, NodeStatusCondition | None]:
    """Pure: node -> the unit-wait condition it must carry after ``decision`` (None: none), for the
    nodes where that differs from what they carry. ``units``: node -> the nodes of its workload
    unit, in order (``WorkloadOrder.units``)."""
    type_ = unit_wait_condition_type(profile)
    wanted = {
        held.node: _condition(type_, held, units, decision.state.unit_waits)
        for held in decision.waiting
        if held.reason.startswith(_PREFIX)
    }
    changes: dict[str, NodeStatusCondition | None] = {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        if wanted.get(name) != nodestatus.listed_condition(node, type_):
            changes[name] = wanted.get(name)
    return changes


def _condition(
    type_: str, held: BlockedNode, units: Mapping[str, tuple[str, ...]], since: Mapping[str, datetime]
) -> NodeStatusCondition:
    unit = units.get(held.node, (held.node,))
    began = since.get(unit[0])
    when = f" since {began.isoformat()}" if began is not None else ""
    message = f"held with its workload unit ({', '.join(unit)}){when}: {held.reason.removeprefix(_PREFIX)}"
    return NodeStatusCondition(type_, WAITING, ProfileReason.WAITING_FOR_UNIT, message[:MAX_MESSAGE])


def show(api: ApiClient, node: Mapping[str, Any], condition: NodeStatusCondition | None, type_: str) -> None:
    """Write ``condition`` on ``node`` (as listed), or remove the condition ``type_`` when None."""
    facts = nodestatus.node_facts(node)
    if condition is None:
        nodestatus.remove_condition(api, facts.name, type_, current=facts)
    else:
        nodestatus.set_condition(api, facts.name, condition, current=facts)
