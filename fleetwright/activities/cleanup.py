"""Removing what one profile wrote on the nodes, once the profile is deleted and its uninstall
rollout is complete, and then releasing the NodeProfile's finalizer.

Owns the list of what fleetwright writes on a Node per profile: the package-state annotation, the
cordon marker and the cordon it made (a foreign cordon is never lifted: ``kube.nodes.uncordon``
only lifts a cordon no other owner holds), the status label and the node conditions (its progress
and its unit wait); the shared runtime-required taint comes off where no other profile still holds
it. Idempotent:
each removal reads first and touches only what is still there, so a retry after a crash finishes
the job. It must not decide *when* to clean up; the rollout workflow does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwright.activities import runtime_taint
from fleetwright.activities.payloads import CleanupReport, CleanupRequest
from fleetwright.api.keys import (
    FINALIZER,
    claim_key,
    condition_type,
    cordon_key,
    state_key,
    status_label_key,
    unit_wait_condition_type,
)
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.errors import NodeGoneError
from fleetwright.kube import nodes, nodestatus, resources
from fleetwright.kube.client import ApiClient


@dataclass(frozen=True)
class Leftovers:
    """What of one profile's writes a Node still carries."""

    annotations: tuple[str, ...] = ()
    cordon: bool = False
    label: bool = False
    conditions: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.annotations) or self.cordon or self.label or bool(self.conditions)


def leftovers(node: Mapping[str, Any], profile: str) -> Leftovers:
    """Pure: which of ``profile``'s writes the Node (a dict as the API sends it) still carries."""
    meta = node.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    conditions = {c.get("type") for c in (node.get("status") or {}).get("conditions") or []}
    return Leftovers(
        annotations=tuple(k for k in (state_key(profile), claim_key(profile)) if k in annotations),
        cordon=cordon_key(profile) in annotations,
        label=status_label_key(profile) in (meta.get("labels") or {}),
        conditions=tuple(
            t for t in (condition_type(profile), unit_wait_condition_type(profile)) if t in conditions
        ),
    )


def clean_node(api: ApiClient, profile: str, name: str, left: Leftovers) -> None:
    """Remove ``left`` from one node: the cordon first (it reads its own marker), then the rest."""
    if left.cordon:
        nodes.uncordon(api, name, profile)
    nodestatus.merge_metadata(
        api,
        name,
        labels={status_label_key(profile): None} if left.label else None,
        annotations=dict.fromkeys(left.annotations) or None,
    )
    for type_ in left.conditions:
        nodestatus.remove_condition(api, name, type_)


def clean_up(api: ApiClient, request: CleanupRequest) -> CleanupReport:
    """Clean every node that carries something of the profile, then release its finalizer."""
    cleaned, still_cordoned = [], []
    for node in nodes.list_nodes(api):
        name = str(node["metadata"]["name"])
        left = leftovers(node, request.profile)
        try:
            # The deleting profile no longer holds the shared taint; another incomplete one still may.
            untainted = runtime_taint.carries_taint(node) and runtime_taint.release(api, name).removed
            if left:
                clean_node(api, request.profile, name, left)
            now = nodes.get_node(api, name) if left.cordon else {}
            cordoned = bool((now.get("spec") or {}).get("unschedulable"))
        except NodeGoneError:
            continue  # deleted since the list: nothing of the profile is left on it
        if left or untainted:
            cleaned.append(name)
        if cordoned:
            still_cordoned.append(name)
    resources.remove_finalizer(api, PROFILE_PLURAL, request.profile, request.profile_uid, FINALIZER)
    return CleanupReport(nodes=tuple(cleaned), kept_foreign_cordon=tuple(still_cordoned))
