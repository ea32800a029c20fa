"""The gang manifests and the binder's choices (``fleetwright.local.gangjobs``)."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.local.gangjobs import (
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    binding,
    pytorch_job,
    pytorch_slot,
    stopped,
    unbound_slots,
)

pytestmark = pytest.mark.unit


def pod(name: str, kind: str, index: int, node: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {REPLICA_TYPE_LABEL: kind, REPLICA_INDEX_LABEL: str(index)},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": "Pending"}}


def test_a_pytorch_job_has_one_master_and_the_rest_workers() -> None:
    job = pytorch_job("train", "ns", "group=a", 4, gpus=8)
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 3)
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_a_one_pod_pytorch_job_is_refused_naming_the_count() -> None:
    with pytest.raises(ValueError, match="count"):
        pytorch_job("train", "ns", "group=a", 1)


def test_the_master_takes_slot_zero_and_worker_i_slot_i_plus_one() -> None:
    assert pytorch_slot(pod("m", "master", 0)) == 0
    assert pytorch_slot(pod("w", "worker", 2)) == 3


def test_only_the_first_live_unbound_pod_of_an_unplaced_slot_is_bound() -> None:
    pods = [
        pod("m", "master", 0, node="n0"),
        pod("w0-old", "worker", 0, deleting=True),
        pod("w0", "worker", 0),
        pod("w0-dup", "worker", 0),
        pod("w1", "worker", 1),
    ]
    chosen = unbound_slots(pods, pytorch_slot, ["n0", "n1", "n2"], done={0, 2})
    assert [(p["metadata"]["name"], node) for p, node in chosen] == [("w0", "n1")]


def test_a_slot_beyond_the_gang_is_an_error_naming_the_pod() -> None:
    with pytest.raises(ValueError, match="w5"):
        unbound_slots([pod("w5", "worker", 5)], pytorch_slot, ["n0", "n1"], done=set())


def test_a_pod_is_stopped_when_deleting_or_failed() -> None:
    assert stopped(pod("a", "worker", 0, deleting=True))
    assert stopped({"metadata": {}, "status": {"phase": "Failed"}})
    assert not stopped(pod("a", "worker", 0, node="n0"))


def test_a_binding_targets_the_node() -> None:
    body = binding("p", "ns", "n1")
    assert (body["kind"], body["metadata"], body["target"]["name"]) == (
        "Binding",
        {"name": "p", "namespace": "ns"},
        "n1",
    )
