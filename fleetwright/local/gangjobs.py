"""Training gangs run by their real controllers on kwok nodes: the manifests of an Indexed Job
(the Job controller) and of a PyTorchJob (the Kubeflow training operator) with one pod per node,
each pod's place in its gang, whether a pod has stopped (evicted, failed or being deleted), and
the Bindings that place a gang's pods on their nodes (the local control plane runs no scheduler).

Pure: builds and reads plain dicts. Used by the integration tier (``tests/support/gangjobs.py``)
and the live interruptions bench (``bench/interruptions_live.py``), which read the API themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwright.local.nodes import OUTCOME_LABEL

INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
TRAINING_JOB_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
HOSTNAME = "kubernetes.io/hostname"
TRAIN_IMAGE = "registry.example.com/train:1"


@dataclass(frozen=True)
class Gang:
    """How to find a controller's pods of one job (``selector``) and each pod's place in the gang
    (``slot``, 0 to n-1: the node it belongs on)."""

    selector: str
    slot: Callable[[Mapping[str, Any]], int]


def indexed_job_gang(job: str) -> Gang:
    """An Indexed Job's pods, placed by their completion index."""
    return Gang(f"{JOB_NAME_LABEL}={job}", lambda pod: int(pod["metadata"]["annotations"][INDEX_ANNOTATION]))


def pytorch_slot(pod: Mapping[str, Any]) -> int:
    """A PyTorchJob pod's place: its master first, then worker ``i`` at ``i + 1``."""
    labels = pod["metadata"]["labels"]
    index = int(labels[REPLICA_INDEX_LABEL])
    return index if labels[REPLICA_TYPE_LABEL] == "master" else index + 1


def pytorch_job_gang(job: str) -> Gang:
    """A PyTorchJob's pods, by ``pytorch_slot``."""
    return Gang(f"{TRAINING_JOB_LABEL}={job}", pytorch_slot)


def training_pod(node_label: str, gpus: int) -> dict[str, Any]:
    """A gang pod's template: on the nodes carrying ``node_label`` (``key=value``), running until
    evicted (kwok's ``hang`` outcome)."""
    key, _, value = node_label.partition("=")
    limits = {"nvidia.com/gpu": str(gpus)}
    container = {"name": "train", "image": TRAIN_IMAGE, "resources": {"limits": limits}}
    return {
        "metadata": {"labels": {OUTCOME_LABEL: "hang"}},
        "spec": {"nodeSelector": {key: value}, "containers": [container]},
    }


def indexed_job(name: str, namespace: str, node_label: str, count: int, gpus: int = 8) -> dict[str, Any]:
    """An Indexed Job of ``count`` pods run at once, one per node (required anti-affinity on its
    job-name label over the hostname). An evicted pod is replaced (``backoffLimit`` above
    ``count``), so the Job controller itself deletes none of them."""
    template = training_pod(node_label, gpus)
    template["spec"]["restartPolicy"] = "Never"
    template["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {JOB_NAME_LABEL: name}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "backoffLimit": 2 * count,
            "template": template,
        },
    }


def pytorch_job(name: str, namespace: str, node_label: str, count: int, gpus: int = 8) -> dict[str, Any]:
    """A PyTorchJob of one master and ``count - 1`` workers; the operator replaces an evicted pod
    (``OnFailure``)."""
    if count < 2:
        raise ValueError(f"count: a PyTorchJob here has a master and at least one worker, not {count} pods")

    def replicas(n: int) -> dict[str, Any]:
        template = training_pod(node_label, gpus)
        template["spec"]["containers"][0]["name"] = "pytorch"  # the container the operator configures
        return {"replicas": n, "restartPolicy": "OnFailure", "template": template}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(count - 1)}},
    }


def stopped(pod: Mapping[str, Any]) -> bool:
    """Evicted (an eviction sets the deletion timestamp), being deleted, or failed."""
    return (
        bool(pod["metadata"].get("deletionTimestamp")) or (pod.get("status") or {}).get("phase") == "Failed"
    )


def binding(pod: str, namespace: str, node: str) -> dict[str, Any]:
    """The Binding that places ``pod`` on ``node`` (what a scheduler writes)."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def unbound_slots(
    pods: Iterable[Mapping[str, Any]],
    slot: Callable[[Mapping[str, Any]], int],
    nodes: Sequence[str],
    done: set[int],
) -> list[tuple[Mapping[str, Any], str]]:
    """(pod, node) for the first unbound, live pod of each slot not in ``done`` (the slots already
    placed once): a replacement of an evicted pod is never placed, so only the original pods run."""
    wanted: list[tuple[Mapping[str, Any], str]] = []
    taken = set(done)
    for pod in pods:
        at = slot(pod)
        if pod.get("spec", {}).get("nodeName") or pod["metadata"].get("deletionTimestamp") or at in taken:
            continue
        if not 0 <= at < len(nodes):
            raise ValueError(
                f"pod {pod['metadata'].get('name')}: slot {at} outside the gang's {len(nodes)} nodes"
            )
        wanted.append((pod, nodes[at]))
        taken.add(at)
    return wanted
