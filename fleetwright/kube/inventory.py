"""Read-only listings of Nodes, Jobs, Pods and fleetwright's custom objects as plain dicts (the
apiserver's JSON shape, as ``kubectl get -o json``), for observers such as the chaos suite's
watcher, and the Node list every fleet reader shares (``kube.nodes.list_nodes``). An observer's call
is bounded by a request timeout so it never hangs on a dead apiserver. It must not write anything.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from kubernetes import client

from fleetwright.api.common import VERSION
from fleetwright.api.keys import GROUP
from fleetwright.kube.client import fetch_json
from fleetwright.kube.errors import classified

Kind = Literal["nodes", "jobs", "pods"]


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
    options: dict[str, Any] = {"label_selector": label_selector}
    if timeout_seconds is not None:
        options["_request_timeout"] = timeout_seconds
    with classified(f"list {kind}"):
        if kind == "nodes":
            data = fetch_json(client.CoreV1Api(api).list_node, **options)
        elif kind == "jobs":
            data = fetch_json(client.BatchV1Api(api).list_namespaced_job, namespace, **options)
        else:
            data = fetch_json(client.CoreV1Api(api).list_namespaced_pod, namespace, **options)
    return list(data.get("items") or [])


def get_custom(
    api: client.ApiClient, plural: str, name: str, *, timeout_seconds: float = 10.0
) -> dict[str, Any]:
    """One cluster-scoped fleetwright object; NotFoundError when it does not exist."""
    with classified(f"get {plural}.{GROUP}/{name}"):
        obj = client.CustomObjectsApi(api).get_cluster_custom_object(
            GROUP, VERSION, plural, name, _request_timeout=timeout_seconds
        )
    return cast(dict[str, Any], obj)
