"""Read-only listings of Nodes, Jobs, Pods and fleetwright's custom objects as plain dicts (the
apiserver's JSON shape, as ``kubectl get -o json``), for observers such as the chaos suite's
watcher. Every call is bounded by a request timeout so an observer never hangs on a dead apiserver.
It must not write anything.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from kubernetes import client

from fleetwright.api.common import GROUP, VERSION
from fleetwright.kube.errors import classified

Kind = Literal["nodes", "jobs", "pods"]


def list_items(
    api: client.ApiClient,
    kind: Kind,
    *,
    namespace: str = "",
    label_selector: str = "",
    timeout_seconds: float = 10.0,
) -> list[dict[str, Any]]:
    """Every object of ``kind`` (namespaced kinds in ``namespace``) matching ``label_selector``."""
    options: dict[str, Any] = {"label_selector": label_selector, "_request_timeout": timeout_seconds}
    listing: Any
    with classified(f"list {kind}"):
        if kind == "nodes":
            listing = client.CoreV1Api(api).list_node(**options)
        elif kind == "jobs":
            listing = client.BatchV1Api(api).list_namespaced_job(namespace, **options)
        else:
            listing = client.CoreV1Api(api).list_namespaced_pod(namespace, **options)
    data = cast(dict[str, Any], api.sanitize_for_serialization(listing))  # type: ignore[no-untyped-call]
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
