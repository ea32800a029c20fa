"""Node operations: cordon and uncordon with ownership, so a foreign cordon is never released.

A cordon fleetwright makes records its owners (profile names) in ``CORDON_OWNERS_ANNOTATION``.
A node that is already unschedulable without that annotation was cordoned by someone else: we
work under it and never uncordon it. Writes carry the resourceVersion they were computed from,
so a concurrent edit fails with a conflict (retryable) instead of being overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client

from fleetwright.kube.errors import classified

CORDON_OWNERS_ANNOTATION = "fleetwright.io/cordoned-by"


@dataclass(frozen=True)
class CordonResult:
    node: str
    # True when the node is unschedulable through (at least) our cordon.
    ours: bool
    # True when someone else had cordoned it before we came.
    foreign: bool


def _owners(node: Any) -> list[str]:
    raw = (node.metadata.annotations or {}).get(CORDON_OWNERS_ANNOTATION, "")
    return [o for o in raw.split(",") if o]


def get_node(api: client.ApiClient, name: str) -> Any:
    with classified(f"get node {name}"):
        return client.CoreV1Api(api).read_node(name)


def cordon(api: client.ApiClient, name: str, owner: str) -> CordonResult:
    """Mark ``name`` unschedulable on behalf of ``owner``; idempotent."""
    node = get_node(api, name)
    owners = _owners(node)
    unschedulable = bool(node.spec.unschedulable)
    if unschedulable and not owners:
        return CordonResult(name, ours=False, foreign=True)
    if unschedulable and owner in owners:
        return CordonResult(name, ours=True, foreign=False)
    new_owners = sorted({*owners, owner})
    patch = {
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "annotations": {CORDON_OWNERS_ANNOTATION: ",".join(new_owners)},
        },
        "spec": {"unschedulable": True},
    }
    with classified(f"cordon node {name}"):
        client.CoreV1Api(api).patch_node(name, patch)
    return CordonResult(name, ours=True, foreign=False)


def uncordon(api: client.ApiClient, name: str, owner: str) -> bool:
    """Drop ``owner``'s cordon; make the node schedulable only when no owner is left and the
    cordon was ours. Returns True when the node became schedulable."""
    node = get_node(api, name)
    owners = _owners(node)
    if owner not in owners:
        return False
    remaining = [o for o in owners if o != owner]
    annotations: dict[str, str | None] = {
        CORDON_OWNERS_ANNOTATION: ",".join(remaining) if remaining else None
    }
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": node.metadata.resource_version, "annotations": annotations}
    }
    if not remaining:
        patch["spec"] = {"unschedulable": None}
    with classified(f"uncordon node {name}"):
        client.CoreV1Api(api).patch_node(name, patch)
    return not remaining
