"""Node operations: cordon and uncordon with ownership, so a foreign cordon is never released;
and the runtime-required taint (added on join, removed when no profile holds it any more).

A cordon fleetwright makes is recorded per profile in ``fleetwright.io/cordon.<profile>`` (the
planner reads the same key, ``planner.fleet.cordon_key``), one key per writer as NodeWright's
``cordon_<cr>``. A node that is already unschedulable without any such key was cordoned by someone
else: we work under it and never uncordon it. Writes carry the resourceVersion they were computed
from, so a concurrent edit fails with a conflict (retryable) instead of being overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client

from fleetwright.api.keys import CORDON_PREFIX, RUNTIME_REQUIRED_TAINT, cordon_key
from fleetwright.errors import NodeGoneError
from fleetwright.kube import inventory
from fleetwright.kube.client import fetch_json, send
from fleetwright.kube.errors import classified
from fleetwright.planner.profile.runtime import carries, runtime_taint


@dataclass(frozen=True)
class CordonResult:
    node: str
    # True when the node is unschedulable through (at least) our cordon.
    ours: bool
    # True when someone else had cordoned it before we came.
    foreign: bool


def _owner_keys(node: dict[str, Any]) -> set[str]:
    return {k for k in node["metadata"].get("annotations") or {} if k.startswith(CORDON_PREFIX)}


def get_node(api: client.ApiClient, name: str) -> dict[str, Any]:
    """The Node as the apiserver's JSON (camelCase)."""
    with classified(f"get node {name}", not_found=NodeGoneError):
        return fetch_json(client.CoreV1Api(api).read_node, name)


def _patch(api: client.ApiClient, name: str, patch: dict[str, Any], what: str) -> None:
    with classified(f"{what} node {name}", not_found=NodeGoneError):
        send(client.CoreV1Api(api).patch_node, name, patch)


def cordon(api: client.ApiClient, name: str, owner: str) -> CordonResult:
    """Mark ``name`` unschedulable on behalf of ``owner``; idempotent."""
    node = get_node(api, name)
    owners = _owner_keys(node)
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    if unschedulable and not owners:
        return CordonResult(name, ours=False, foreign=True)
    if unschedulable and cordon_key(owner) in owners:
        return CordonResult(name, ours=True, foreign=False)
    patch = {
        "metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "annotations": {cordon_key(owner): "true"},
        },
        "spec": {"unschedulable": True},
    }
    _patch(api, name, patch, "cordon")
    return CordonResult(name, ours=True, foreign=False)


def uncordon(api: client.ApiClient, name: str, owner: str) -> bool:
    """Drop ``owner``'s cordon; make the node schedulable only when no owner is left and the
    cordon was ours. Returns True when the node became schedulable."""
    node = get_node(api, name)
    key = cordon_key(owner)
    owners = _owner_keys(node)
    if key not in owners:
        return False
    remaining = owners - {key}
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": node["metadata"]["resourceVersion"], "annotations": {key: None}}
    }
    if not remaining:
        patch["spec"] = {"unschedulable": None}
    _patch(api, name, patch, "uncordon")
    return not remaining


def list_nodes(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every Node as a plain dict (camelCase, as ``kubectl get -o json``), for pure readers."""
    return inventory.list_items(api, "nodes", timeout_seconds=None)


def _taint_patch(node: dict[str, Any], taints: list[dict[str, Any]]) -> dict[str, Any]:
    # The whole list with the resourceVersion it came from: a concurrent taint edit is a conflict.
    return {
        "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
        "spec": {"taints": taints or None},
    }


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: t[k] for k in ("key", "value", "effect") if t.get(k) is not None}
        for t in (node.get("spec") or {}).get("taints") or []
    ]


def add_runtime_taint(api: client.ApiClient, name: str) -> bool:
    """Taint ``name`` with ``fleetwright.io/runtime-required:NoSchedule``; True when added now."""
    node = get_node(api, name)
    taints = _taints(node)
    if carries(taints):
        return False
    taints.append(runtime_taint())
    _patch(api, name, _taint_patch(node, taints), "taint")
    return True


def remove_runtime_taint(api: client.ApiClient, name: str) -> bool:
    """Remove the runtime-required taint from ``name``; True when it was there."""
    node = get_node(api, name)
    taints = _taints(node)
    kept = [t for t in taints if t["key"] != RUNTIME_REQUIRED_TAINT]
    if len(kept) == len(taints):
        return False
    _patch(api, name, _taint_patch(node, kept), "untaint")
    return True
