"""What the node activities read from and write onto a Node besides the cordon: boot id and Ready,
labels and annotations (merge patches of single keys), and node conditions (status subresource).

Writes are small and keyed, so several writers (one per profile) never rewrite each other's data
(NodeWright PR #413). A condition is rewritten only when its status, reason or message changes
(no PATCH churn, NodeWright #603), and keeps its lastTransitionTime while its status holds. It must
not decide which key or condition a profile uses (the activities do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from fleetwright.errors import NodeGoneError
from fleetwright.kube.client import fetch_json, send
from fleetwright.kube.errors import classified
from fleetwright.kube.watching import wait_for_change

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class NodeStatusCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class NodeFacts:
    name: str
    uid: str
    boot_id: str
    ready: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    conditions: Mapping[str, NodeStatusCondition] = field(default_factory=dict)
    transitions: Mapping[str, str] = field(default_factory=dict)
    """Condition type -> its lastTransitionTime as the apiserver wrote it (RFC 3339)."""


def _condition(entry: Mapping[str, Any]) -> NodeStatusCondition:
    reason, message = entry.get("reason") or "", entry.get("message") or ""
    return NodeStatusCondition(entry["type"], entry.get("status", ""), reason, message)


def listed_condition(node: Mapping[str, Any], type_: str) -> NodeStatusCondition | None:
    """The Node's (as the apiserver's JSON) condition ``type_``, if it has one: a scan of a whole
    fleet's list for one condition, without parsing the rest of each Node."""
    for entry in (node.get("status") or {}).get("conditions") or []:
        if entry.get("type") == type_:
            return _condition(entry)
    return None


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    """From the Node as the apiserver's JSON (``fetch_json``, ``kube.nodes.list_nodes``)."""
    metadata, status = node.get("metadata") or {}, node.get("status") or {}
    conditions = {c["type"]: _condition(c) for c in status.get("conditions") or []}
    ready = conditions.get("Ready")
    return NodeFacts(
        name=metadata.get("name", ""),
        uid=metadata.get("uid", ""),
        boot_id=(status.get("nodeInfo") or {}).get("bootID") or "",
        ready=ready is not None and ready.status == "True",
        labels=dict(metadata.get("labels") or {}),
        annotations=dict(metadata.get("annotations") or {}),
        conditions=conditions,
        transitions={
            c["type"]: str(c.get("lastTransitionTime") or "") for c in status.get("conditions") or []
        },
    )


def _version(item: Mapping[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("resourceVersion") or "")


def read_node(api: client.ApiClient, name: str) -> tuple[NodeFacts, str]:
    """The node's facts and its own resourceVersion. A GET by name: a list selecting one Node by
    name costs the apiserver a scan of every Node, and these reads happen on every status write."""
    with classified(f"get node {name}", not_found=NodeGoneError):
        node = fetch_json(client.CoreV1Api(api).read_node, name)
    return node_facts(node), _version(node)


def read_node_to_watch(api: client.ApiClient, name: str) -> tuple[NodeFacts, str]:
    """The node's facts and the list's resourceVersion, which a watch can always start from (a
    quiet Node's own version may be older than the apiserver keeps events for)."""
    with classified(f"list node {name}"):
        listing = fetch_json(client.CoreV1Api(api).list_node, field_selector=f"metadata.name={name}")
    if not listing.get("items"):
        raise NodeGoneError(f"node {name} does not exist")
    return node_facts(listing["items"][0]), _version(listing)


def wait_for_node(api: client.ApiClient, name: str, resource_version: str, seconds: float) -> bool:
    """Block until the Node changes or ``seconds`` pass."""
    return wait_for_change(
        client.CoreV1Api(api).list_node,
        resource_version=resource_version,
        seconds=seconds,
        what=f"watch node {name}",
        field_selector=f"metadata.name={name}",
    )


def merge_metadata(
    api: client.ApiClient,
    name: str,
    *,
    labels: Mapping[str, str | None] | None = None,
    annotations: Mapping[str, str | None] | None = None,
) -> None:
    """Merge-patch only the given label/annotation keys (None removes a key)."""
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if not metadata:
        return
    with classified(f"patch node {name} metadata", not_found=NodeGoneError):
        send(client.CoreV1Api(api).patch_node, name, {"metadata": metadata}, _content_type=MERGE_PATCH)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    api: client.ApiClient, name: str, condition: NodeStatusCondition, *, current: NodeFacts | None = None
) -> bool:
    """Write one node condition through the status subresource; True when something changed.
    ``current`` spares a read when the caller just read the node."""
    if current is None:
        current, _ = read_node(api, name)
    previous = current.conditions.get(condition.type)
    if previous == condition:
        return False
    now = _rfc3339(datetime.now(UTC))
    entry: dict[str, Any] = {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "lastHeartbeatTime": now,
    }
    if previous is None or previous.status != condition.status:
        entry["lastTransitionTime"] = now
    # Strategic merge: Node conditions merge by type, so the kubelet's own conditions stay.
    with classified(f"patch node {name} condition {condition.type}", not_found=NodeGoneError):
        send(
            client.CoreV1Api(api).patch_node_status,
            name,
            {"status": {"conditions": [entry]}},
            _content_type=STRATEGIC_MERGE_PATCH,
        )
    return True


def remove_condition(
    api: client.ApiClient, name: str, type_: str, *, current: NodeFacts | None = None
) -> bool:
    """Remove one node condition (ours; the kubelet's are never named here); True when it was there."""
    if current is None:
        current, _ = read_node(api, name)
    if type_ not in current.conditions:
        return False
    # Strategic merge's delete directive removes the one entry keyed by type, leaving the others.
    with classified(f"remove node {name} condition {type_}", not_found=NodeGoneError):
        send(
            client.CoreV1Api(api).patch_node_status,
            name,
            {"status": {"conditions": [{"type": type_, "$patch": "delete"}]}},
            _content_type=STRATEGIC_MERGE_PATCH,
        )
    return True
