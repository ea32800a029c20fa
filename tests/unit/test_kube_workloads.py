"""Tracing pods to the workloads that stop as a whole (``kube.workloads``), and the rollout
activity's observation carrying them to the planner."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import observe, plan_turn
from fleetwright.errors import PermanentError
from fleetwright.kube.workloads import (
    gpus_of,
    node_workloads,
    policy_pods,
    table_pods,
    waited_pods,
    workload_of,
)
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner import convert
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeWorkload

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def pod(
    node: str = "gpu-1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str | None = None,
    gpus: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ml", "labels": labels or {}}
    meta["annotations"] = annotations or {}
    if owner is not None:
        kind, name = owner.split("/")
        meta["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
    resources = {"limits": {"nvidia.com/gpu": gpus}} if gpus is not None else {}
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        (pod(owner="Job/train"), "Job/ml/train"),
        (pod(owner="PyTorchJob/llama"), "PyTorchJob/ml/llama"),
        (pod(labels={"jobset.sigs.k8s.io/jobset-name": "js"}, owner="Job/js-w-0"), "JobSet/ml/js"),
        (
            pod(
                labels={
                    "leaderworkerset.sigs.k8s.io/name": "lws",
                    "leaderworkerset.sigs.k8s.io/group-index": "3",
                }
            ),
            "LeaderWorkerSet/ml/lws-3",
        ),
        (pod(labels={"training.kubeflow.org/job-name": "tj"}), "TrainingJob/ml/tj"),
        (pod(annotations={"scheduling.k8s.io/group-name": "pg"}), "PodGroup/ml/pg"),
        (pod(labels={"kueue.x-k8s.io/pod-group-name": "kg"}), "PodGroup/ml/kg"),
        (pod(owner="ReplicaSet/web-5d9"), None),
        (pod(owner="DaemonSet/dcgm"), None),
        (pod(), None),
        (pod(owner="Job/stage", labels={"app.kubernetes.io/managed-by": "fleetwright"}), None),
        (pod(owner="Job/x", annotations={"kubernetes.io/config.mirror": "abc"}), None),
    ],
)
def test_a_pod_is_traced_to_the_group_that_restarts_together(
    made: dict[str, Any], expected: str | None
) -> None:
    assert workload_of(made) == expected


def owned(kind: str, api_version: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod whose controlling owner reference is what a real controller writes."""
    made = pod(labels=labels)
    made["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": name, "uid": "u-1", "controller": True}
    ]
    return made


def test_a_kubeflow_job_is_traced_through_its_owner_before_its_label() -> None:
    # What the training operator writes on a PyTorchJob's pod: its owner and its job-name label.
    label = {"training.kubeflow.org/job-name": "llama"}
    operator_pod = owned("PyTorchJob", "kubeflow.org/v1", "llama", label)
    assert workload_of(operator_pod) == "PyTorchJob/ml/llama"
    assert workload_of(owned("Job", "batch/v1", "train")) == "Job/ml/train"
    # Without such an owner, the label still names the gang.
    assert workload_of(pod(labels={"training.kubeflow.org/job-name": "tj"})) == "TrainingJob/ml/tj"


def test_an_owner_of_another_api_group_is_no_workload_by_kind_alone() -> None:
    volcano = {"volcano.sh/job-name": "vj"}
    assert workload_of(owned("Job", "batch.volcano.sh/v1alpha1", "vj")) is None
    assert workload_of(owned("Job", "batch.volcano.sh/v1alpha1", "vj", volcano)) == "VolcanoJob/ml/vj"
    assert workload_of(owned("PyTorchJob", "example.com/v1", "x")) is None


def test_a_jobsets_label_outranks_its_pods_job_owner() -> None:
    made = owned("Job", "batch/v1", "js-workers-0", {"jobset.sigs.k8s.io/jobset-name": "js"})
    assert workload_of(made) == "JobSet/ml/js"


def test_the_policy_label_key_comes_first() -> None:
    made = pod(labels={"example.com/run": "r7", "jobset.sigs.k8s.io/jobset-name": "js"})
    assert workload_of(made, "example.com/run") == "example.com/run/ml/r7"
    assert workload_of(made) == "JobSet/ml/js"


def test_gpus_are_counted_from_limits_then_requests() -> None:
    assert gpus_of(pod(gpus="8")) == 8
    requested = pod()
    requested["spec"]["containers"] = [
        {"name": "a", "resources": {"requests": {"amd.com/gpu": "2"}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}}},
    ]
    assert gpus_of(requested) == 6
    assert gpus_of(pod(gpus="1500m")) == 0


def test_each_node_lists_its_workloads_with_pods_and_gpus() -> None:
    pods = [
        pod("gpu-1", owner="Job/a", gpus="8"),
        pod("gpu-1", owner="Job/a", gpus="8"),
        pod("gpu-1", owner="Job/b", gpus="0"),
        pod("gpu-2", owner="Job/a", gpus="8"),
        pod("gpu-2", owner="Job/done", phase="Succeeded"),
        pod("gpu-3", owner="ReplicaSet/web"),
    ]
    assert node_workloads(pods) == {
        "gpu-1": (
            NodeWorkload(name="Job/ml/a", pods=2, gpus=16),
            NodeWorkload(name="Job/ml/b", pods=1, gpus=0),
        ),
        "gpu-2": (NodeWorkload(name="Job/ml/a", pods=1, gpus=8),),
    }


def test_the_rollout_turn_starts_a_workloads_nodes_together() -> None:
    nodes = fleet_nodes.fleet(6)
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    names = [str(n["metadata"]["name"]) for n in nodes]
    job = (NodeWorkload(name="Job/ml/a", gpus=8),)
    on_nodes = {names[0]: job, names[3]: job, names[5]: job}
    tuning = examples.profile("tuning")
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 3}}]
    spec = convert.rollout_spec(tuning, examples.policy(max_unavailable=3, steps=steps))
    request = DecideRequest(now=NOW, profile=tuning, state=begin(spec, NOW))
    observations, _ = observe(nodes, request, (), on_nodes)
    assert {o.name: o.workloads for o in observations.nodes if o.workloads} == on_nodes
    # Idle nodes first: the first batch is three idle nodes, the job's three start together next.
    first = plan_turn(nodes, request, (), on_nodes).report.decision
    assert not {s.node for s in first.start} & set(on_nodes)
    plain = plan_turn(nodes, request).report.decision
    assert {s.node for s in plain.start} & set(on_nodes)  # without workloads: the zone-spread order


def test_the_pods_a_workload_wait_waits_for_are_listed_by_node() -> None:
    def named(made: dict[str, Any], name: str) -> dict[str, Any]:
        made["metadata"]["name"] = name
        return made

    pods = [
        named(pod("gpu-1", labels={"app": "train"}), "t-1"),
        named(pod("gpu-1", labels={"app": "train"}, phase="Succeeded"), "t-0"),
        named(pod("gpu-2", labels={"app": "web"}), "w-0"),
        named(pod("gpu-2", labels={"app": "train", "app.kubernetes.io/managed-by": "fleetwright"}), "s-0"),
    ]
    assert waited_pods(pods, Selector(match_labels={"app": "train"})) == {"gpu-1": ("ml/t-1",)}


WAIT = {"selector": {"matchLabels": {"app": "train"}}, "timeoutSeconds": 600}


@pytest.mark.parametrize(
    ("settings", "orders", "waits"),
    [
        ({}, True, False),
        ({"workload_wait": WAIT}, True, True),
        ({"workload_wait": WAIT, "workload_order": False}, False, True),
        ({"workload_order": False}, False, False),
    ],
)
def test_a_policy_reads_the_workloads_and_the_waited_pods_it_uses(
    settings: dict[str, Any], orders: bool, waits: bool
) -> None:
    pods = [
        pod("gpu-1", labels={"example.com/run": "r1", "app": "train"}, owner="Job/a", gpus="8"),
        pod("gpu-2", labels={"app": "web"}, owner="Job/b"),
    ]
    policy = convert.policy(examples.policy(workload_label="example.com/run", **settings))
    workloads, finishing = policy_pods(iter(pods), policy)  # an iterator of the pods serves both
    assert workloads == (node_workloads(pods, "example.com/run") if orders else None)
    traced = (NodeWorkload(name="example.com/run/ml/r1", pods=1, gpus=8),)
    assert workloads is None or workloads["gpu-1"] == traced
    assert finishing == ({"gpu-1": ("ml/p",)} if waits else None)


# The columns kube-apiserver prints for pods (``kubectl get pods -o wide``).
POD_COLUMNS = [
    "Name",
    "Ready",
    "Status",
    "Restarts",
    "Age",
    "IP",
    "Node",
    "Nominated Node",
    "Readiness Gates",
]


def table(pods: list[dict[str, Any]], columns: list[str] = POD_COLUMNS) -> dict[str, Any]:
    """The pods as the apiserver's Table with each row's metadata (``includeObject=Metadata``)."""
    rows = []
    for made in pods:
        cells: list[Any] = ["x"] * len(columns)
        if "Node" in columns:
            cells[columns.index("Node")] = made["spec"]["nodeName"]
        rows.append(
            {"cells": cells, "object": {"kind": "PartialObjectMetadata", "metadata": made["metadata"]}}
        )
    return {"kind": "Table", "columnDefinitions": [{"name": c} for c in columns], "rows": rows}


def test_a_pods_table_gives_the_turn_the_same_workloads_and_waits_without_gpus() -> None:
    pods = [
        pod("gpu-1", owner="Job/a", gpus="8"),
        pod("gpu-1", labels={"jobset.sigs.k8s.io/jobset-name": "js", "app": "train"}, gpus="8"),
        pod("gpu-2", annotations={"scheduling.k8s.io/group-name": "pg"}),
        pod("gpu-2", labels={"example.com/run": "r1", "app": "train"}),
        pod("gpu-3", owner="ReplicaSet/web"),
    ]
    listed = table_pods(table(pods))
    assert [p["spec"]["nodeName"] for p in listed] == ["gpu-1", "gpu-1", "gpu-2", "gpu-2", "gpu-3"]
    whole = node_workloads(pods, "example.com/run")
    assert whole["gpu-1"][0].gpus == 8  # the whole pods carry their GPUs; the table's do not
    assert node_workloads(listed, "example.com/run") == {
        node: tuple(w.model_copy(update={"gpus": 0}) for w in shares) for node, shares in whole.items()
    }
    train = Selector(match_labels={"app": "train"})
    assert waited_pods(listed, train) == waited_pods(pods, train)


def test_a_pods_table_without_a_node_column_is_an_error_naming_it() -> None:
    columns = [c for c in POD_COLUMNS if c != "Node"]
    with pytest.raises(PermanentError, match="no 'Node' column"):
        table_pods(table([pod()], columns))
    assert table_pods(table([], columns)) == []
