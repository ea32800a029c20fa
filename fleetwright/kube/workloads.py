"""Which workloads run on which nodes, for the rollout order (``planner.rollout.ordering``).

A workload here is a group of pods that stops as a whole when any one of them is evicted: a
training job's gang. A pod is traced to one by, in order: the label key the DeploymentPolicy names
(``workloadLabel``), the labels of the gang controllers whose pods belong to another controller's
object (LeaderWorkerSet, one group per replica; JobSet, whose pods are its Jobs'), its controlling
owner when that is a Job or a Kubeflow training job (``OWNER_KINDS``, matched by kind and API
group: Pod -> PyTorchJob of ``kubeflow.org/v1``), then the labels that name a gang without such an
owner (a Kubeflow training job's, Volcano and Kueue pod groups). Pods of Deployments,
StatefulSets, DaemonSets, bare and mirror pods, fleetwright's own stage pods and finished pods are
no workload: a replica of a service survives one node's drain. The GPUs are the pod's containers'
``nvidia.com/gpu`` and ``amd.com/gpu`` limits (requests where no limit is set).

Also the pods a DeploymentPolicy's ``workloadWait`` waits for, by node (its selector over the same
pods), and ``policy_pods``, the one reading of a list of pods under a policy's settings (for the
rollout turn and the plan preview alike). Owns the paginated list of the bound, unfinished pods of
all namespaces (whole, for the plan preview's GPU counts, or as the apiserver's Table of their
metadata and node, for a rollout turn) and the pure parsing of a pod's JSON into its workload; must
not decide anything about the order or the wait, nor whether to list (``RolloutPolicy.reads_pods``).
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
from fleetwright.planner.policy.model import RolloutPolicy
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.rollout.observations import NodeWorkload

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
JOBSET_LABEL = ("JobSet", "jobset.sigs.k8s.io/jobset-name")
# (kind shown, label key): the labels that name a gang whose pods no OWNER_KINDS owner controls.
GROUP_LABELS = (
    ("TrainingJob", "training.kubeflow.org/job-name"),
    ("VolcanoJob", "volcano.sh/job-name"),
    ("PodGroup", "kueue.x-k8s.io/pod-group-name"),
)
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KUBEFLOW_GROUP = "kubeflow.org"
# Controlling owners whose pods form one workload by themselves: kind -> its API group.
OWNER_KINDS = {
    "Job": "batch",
    **dict.fromkeys(("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"), KUBEFLOW_GROUP),
    "TrainJob": f"trainer.{KUBEFLOW_GROUP}",
    "RayJob": "ray.io",
}
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
    found = (
        _by_gang_labels(labels, label_key)
        or _by_owner(meta.get("ownerReferences") or [])
        or _by_group_labels(labels, annotations)
    )
    if found is None:
        return None
    kind, name = found
    return f"{kind}/{meta.get('namespace') or ''}/{name}"


def _by_gang_labels(labels: Mapping[str, str], label_key: str | None) -> tuple[str, str] | None:
    """The policy's label, then the gangs wider than their pods' owner (a JobSet's pods are its
    Jobs'; a LeaderWorkerSet's group is a part of its StatefulSets)."""
    if label_key and labels.get(label_key):
        return label_key, labels[label_key]
    if labels.get(LWS_NAME):
        return "LeaderWorkerSet", f"{labels[LWS_NAME]}-{labels.get(LWS_GROUP, '0')}"
    kind, key = JOBSET_LABEL
    if labels.get(key):
        return kind, labels[key]
    return None


def _by_group_labels(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[str, str] | None:
    for kind, key in GROUP_LABELS:
        if labels.get(key):
            return kind, labels[key]
    if annotations.get(VOLCANO_GROUP_ANNOTATION):
        return "PodGroup", annotations[VOLCANO_GROUP_ANNOTATION]
    return None


def _by_owner(owners: Iterable[Mapping[str, Any]]) -> tuple[str, str] | None:
    """The controlling owner when it is one of ``OWNER_KINDS`` of its API group (a Volcano ``Job``
    of ``batch.volcano.sh`` is none: its label names it); a reference without ``apiVersion`` (a
    hand-written pod list) is matched by kind."""
    owner = next((o for o in owners if o.get("controller")), None)
    if owner is None or owner.get("kind") not in OWNER_KINDS:
        return None
    kind = str(owner["kind"])
    version = owner.get("apiVersion")
    if version is not None and str(version).rpartition("/")[0] != OWNER_KINDS[kind]:
        return None
    return kind, str(owner.get("name", ""))


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


def policy_pods(
    pods: Iterable[Mapping[str, Any]], policy: RolloutPolicy
) -> tuple[dict[str, tuple[NodeWorkload, ...]] | None, dict[str, tuple[str, ...]] | None]:
    """Pure: the workloads on each node (when the policy orders by workload, ``workload_order``,
    traced with its ``workload_label``) and the pods its ``workload_wait`` waits for on each node;
    None for what the policy does not use. Whether to list the pods at all is
    ``RolloutPolicy.reads_pods``."""
    pods = list(pods)
    wait = policy.workload_wait
    finishing = waited_pods(pods, wait.selector) if wait is not None else None
    workloads = node_workloads(pods, policy.workload_label) if policy.workload_order else None
    return workloads, finishing


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
