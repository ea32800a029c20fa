"""Which workloads run on which nodes, for the rollout order (``planner.ordering``).

A workload here is a group of pods that stops as a whole when any one of them is evicted: a
training job's gang. A pod is traced to one by, in order: the label key the DeploymentPolicy names
(``workloadLabel``), the labels the gang controllers put on their pods (JobSet, LeaderWorkerSet, one
group per replica, Kubeflow training jobs, Volcano and Kueue pod groups), then its controlling owner
when that is a Job or a Kubeflow training job kind. Pods of Deployments, StatefulSets, DaemonSets,
bare and mirror pods, fleetwright's own stage pods and finished pods are no workload: a replica of
a service survives one node's drain. The GPUs are the pod's containers' ``nvidia.com/gpu`` and
``amd.com/gpu`` limits (requests where no limit is set).

Also the pods a DeploymentPolicy's ``workloadWait`` waits for, by node (its selector over the same
pods). Owns the paginated list of the bound, unfinished pods of all namespaces (whole, for the plan
preview's GPU counts, or as the apiserver's Table of their metadata and node, for a rollout turn)
and the pure parsing of a pod's JSON into its workload; must not decide anything about the order or
the wait, nor whether to list (``RolloutPolicy.reads_pods``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kubernetes import client

from fleetwright.api.keys import MANAGED_BY, MANAGED_BY_LABEL
from fleetwright.errors import PermanentError
from fleetwright.kube.client import TABLE, get_json
from fleetwright.kube.errors import classified
from fleetwright.kube.pods import MIRROR_ANNOTATION
from fleetwright.planner.observations import NodeWorkload
from fleetwright.planner.selectors import Selector

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
# (kind shown, label key): the gang controllers' labels on their pods, most specific first.
GROUP_LABELS = (
    ("JobSet", "jobset.sigs.k8s.io/jobset-name"),
    ("TrainingJob", "training.kubeflow.org/job-name"),
    ("VolcanoJob", "volcano.sh/job-name"),
    ("PodGroup", "kueue.x-k8s.io/pod-group-name"),
)
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Controlling owners whose pods form one workload by themselves.
OWNER_KINDS = frozenset(
    {"Job", "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob", "RayJob"}
)
PAGE = 500
PODS = "/api/v1/pods"
NODE_COLUMN = "Node"
RUNNING_FIELDS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def workload_of(pod: Mapping[str, Any], label_key: str | None = None) -> str | None:
    """``<Kind>/<namespace>/<name>`` of the workload ``pod`` belongs to, or None."""
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    if labels.get(MANAGED_BY_LABEL) == MANAGED_BY or MIRROR_ANNOTATION in annotations:
        return None
    found = _by_labels(labels, annotations, label_key) or _by_owner(meta.get("ownerReferences") or [])
    if found is None:
        return None
    kind, name = found
    return f"{kind}/{meta.get('namespace') or ''}/{name}"


def _by_labels(
    labels: Mapping[str, str], annotations: Mapping[str, str], label_key: str | None
) -> tuple[str, str] | None:
    if label_key and labels.get(label_key):
        return label_key, labels[label_key]
    if labels.get(LWS_NAME):
        return "LeaderWorkerSet", f"{labels[LWS_NAME]}-{labels.get(LWS_GROUP, '0')}"
    for kind, key in GROUP_LABELS:
        if labels.get(key):
            return kind, labels[key]
    if annotations.get(VOLCANO_GROUP_ANNOTATION):
        return "PodGroup", annotations[VOLCANO_GROUP_ANNOTATION]
    return None


def _by_owner(owners: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    owner = next((o for o in owners if o.get("controller")), None)
    if owner is not None and owner.get("kind") in OWNER_KINDS:
        return str(owner["kind"]), str(owner.get("name", ""))
    return None


def gpus_of(pod: Mapping[str, Any]) -> int:
    """The GPUs ``pod``'s containers ask for."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for source in (resources.get("limits") or {}, resources.get("requests") or {}):
            found = [source[r] for r in GPU_RESOURCES if r in source]
            if found:
                total += sum(_count(v) for v in found)
                break
    return total


def _count(quantity: object) -> int:
    try:
        return int(str(quantity))
    except ValueError:
        return 0  # GPUs are whole devices; anything else is no GPU count


def node_workloads(
    pods: Iterable[Mapping[str, Any]], label_key: str | None = None
) -> dict[str, tuple[NodeWorkload, ...]]:
    """node -> the workloads with pods on it (by name), with their pods and GPUs there."""
    found: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        name = workload_of(pod, label_key)
        if name is None:
            continue
        share = found[str(node)][name]
        share[0] += 1
        share[1] += gpus_of(pod)
    return {
        node: tuple(NodeWorkload(name=n, pods=p, gpus=g) for n, (p, g) in sorted(shares.items()))
        for node, shares in found.items()
    }


def waited_pods(pods: Iterable[Mapping[str, Any]], selector: Selector) -> dict[str, tuple[str, ...]]:
    """node -> the pods on it that ``selector`` matches (``namespace/name``, sorted), for the
    policy's ``workloadWait``; fleetwright's own stage pods never count."""
    found: dict[str, list[str]] = defaultdict(list)
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels: Mapping[str, str] = meta.get("labels") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed") or labels.get(MANAGED_BY_LABEL) == MANAGED_BY:
            continue
        if selector.matches(labels):
            found[str(node)].append(f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")
    return {node: tuple(sorted(names)) for node, names in found.items()}


def running_pods(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every pod bound to a node and not finished, all namespaces, as plain dicts (whole: the plan
    preview counts their GPUs)."""
    pages = _pages(lambda query: get_json(api, PODS, query))
    return [pod for page in pages for pod in page.get("items") or []]


def bound_pods(api: client.ApiClient) -> list[dict[str, Any]]:
    """The pods of ``running_pods`` with only what a rollout's turn reads: their metadata and
    ``spec.nodeName`` (no containers, so no GPU counts). Listed as the apiserver's Table with each
    row's metadata: a fraction of the whole pods' bytes to send and parse."""

    def page(query: list[tuple[str, str]]) -> dict[str, Any]:
        return get_json(api, PODS, [*query, ("includeObject", "Metadata")], accept=TABLE)

    return [pod for table in _pages(page) for pod in table_pods(table)]


def _pages(fetch: Callable[[list[tuple[str, str]]], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The pages of one list of the bound, unfinished pods, ``PAGE`` at a time."""
    token: str | None = None
    while True:
        query = [("fieldSelector", RUNNING_FIELDS), ("limit", str(PAGE))]
        if token:
            query.append(("continue", token))
        with classified("list pods"):
            page = fetch(query)
        yield page
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


def table_pods(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Pure: a pods Table's rows as pods carrying their metadata and ``spec.nodeName``."""
    columns = [str(c.get("name")) for c in table.get("columnDefinitions") or []]
    rows = table.get("rows") or []
    if not rows:
        return []
    if NODE_COLUMN not in columns:
        raise PermanentError(f"the apiserver's pods table has no {NODE_COLUMN!r} column: {columns}")
    at = columns.index(NODE_COLUMN)
    return [
        {"metadata": (row.get("object") or {}).get("metadata") or {}, "spec": {"nodeName": row["cells"][at]}}
        for row in rows
    ]
