"""The runtime-required taint on a node: released once no runtime-required profile targeting the
node is still incomplete there (``planner.profile.runtime.holding_taint`` decides; this reads the node and
the NodeProfiles and makes the one write). Idempotent: an absent taint is not removed twice.
It must not taint nodes; the controller does that when a node joins.
"""

from __future__ import annotations

from typing import Any

from fleetwright.activities.payloads import RuntimeTaintReport
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.api.nodeprofile import parse_profiles
from fleetwright.kube import nodes, nodestatus, resources
from fleetwright.kube.client import ApiClient
from fleetwright.planner.profile.runtime import carries, holding_taint


def carries_taint(node: dict[str, Any]) -> bool:
    return carries((node.get("spec") or {}).get("taints") or [])


def release(api: ApiClient, node: str) -> RuntimeTaintReport:
    facts, _ = nodestatus.read_node(api, node)
    profiles = parse_profiles(resources.list_objects(api, PROFILE_PLURAL))
    holding = holding_taint(facts.labels, facts.annotations, profiles)
    removed = not holding and nodes.remove_runtime_taint(api, node)
    return RuntimeTaintReport(removed=removed, holding=holding)
