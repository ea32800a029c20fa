"""Read-only listings of Nodes, Jobs, Pods and fleetwright's custom objects as plain dicts (the
apiserver's JSON shape, as ``kubectl get -o json``), for observers such as the chaos suite's
watcher, and the Node list every fleet reader shares (``kube.nodes.list_nodes``). An observer's call
is bounded by a request timeout so it never hangs on a dead apiserver. It must not write anything.
"""

from __future__ import annotations

from typing import Any, Literal

from kubernetes import client

from fleetwright.api.common import VERSION
from fleetwright.api.keys import GROUP
from fleetwright.kube.client import get_json
from fleetwright.kube.errors import classified

Kind = Literal["nodes", "jobs", "pods"]
_PATHS: dict[Kind, str] = {
    "nodes": "/api/v1/nodes",
    "jobs": "/apis/batch/v1/namespaces/{namespace}/jobs",
    "pods": "/api/v1/namespaces/{namespace}/pods",
}


def list_items(
    api: client.ApiClient,
    kind: Kind,
    *,
    namespace: str = "",
    label_selector: str = "",
    timeout_seconds: float | None = 10.0,
) -> list[dict[str, Any]]:
    """Every object of ``kind`` (namespaced kinds in ``namespace``) matching ``label_selector``;
    ``timeout_seconds=None`` waits as long as the list takes (10,000 Nodes can take over 10 s)."""
    query = [("labelSelector", label_selector)] if label_selector else []
    with classified(f"list {kind}"):
        data = get_json(api, _PATHS[kind].format(namespace=namespace), query, timeout=timeout_seconds)
    return list(data.get("items") or [])


def get_custom(
    api: client.ApiClient, plural: str, name: str, *, timeout_seconds: float = 10.0
) -> dict[str, Any]:
    """One cluster-scoped fleetwright object; NotFoundError when it does not exist."""
    with classified(f"get {plural}.{GROUP}/{name}"):
        return get_json(api, f"/apis/{GROUP}/{VERSION}/{plural}/{name}", timeout=timeout_seconds)
