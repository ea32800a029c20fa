"""``fleetwright demo --bad-gpu``'s pure parts: reading the nodes' conditions for the profile, the
node it gives a bad GPU (the first at its gate once another passed its own), the GPU (the one a
check's result lists first, so the failure message shows its value), and the nodes grouped by
their condition for the final lines."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.api.keys import NodeReason, condition_type
from fleetwright.cli.demo import (
    NOT_STARTED,
    NodeCondition,
    by_reason,
    first_listed_gpu,
    node_conditions,
    node_to_break,
)
from fleetwright.local.gpuexporter import GPUS_PER_NODE, gpu_labels
from fleetwright.planner.health.analysis import parse_answer

pytestmark = pytest.mark.unit

PROFILE = "gpu-tuning-gated"


def node(name: str, *conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"conditions": [{"type": t, "reason": r, "message": m} for t, r, m in conditions]},
    }


def gated(reason: str) -> NodeCondition:
    return NodeCondition(reason, "")


def test_node_conditions_reads_the_profiles_condition_and_none_where_it_never_came() -> None:
    ours = condition_type(PROFILE)
    nodes = {
        "items": [
            node("n-0", ("Ready", "KubeletReady", "")),
            node("n-1", ("Ready", "KubeletReady", ""), (ours, NodeReason.HEALTH_GATE, "measuring")),
            node("n-2", (condition_type("other"), NodeReason.COMPLETE, "")),
            {"metadata": {"name": "n-3"}},
        ]
    }
    assert node_conditions(nodes, PROFILE) == {
        "n-0": None,
        "n-1": NodeCondition(NodeReason.HEALTH_GATE, "measuring"),
        "n-2": None,
        "n-3": None,
    }


def test_no_node_is_broken_before_one_passed_its_gate() -> None:
    # The canary at its gate is left alone: a passing gate shows first.
    assert node_to_break({"n-0": gated(NodeReason.HEALTH_GATE), "n-1": None}) is None
    assert node_to_break({"n-0": gated(NodeReason.UPDATING), "n-1": None}) is None
    assert node_to_break({}) is None


def test_the_first_node_at_its_gate_after_a_pass_is_broken() -> None:
    conditions = {
        "n-0": gated(NodeReason.GATE_PASSED),
        "n-1": gated(NodeReason.UPDATING),
        "n-3": gated(NodeReason.HEALTH_GATE),
        "n-2": gated(NodeReason.HEALTH_GATE),
        "n-4": None,
    }
    assert node_to_break(conditions) == "n-2"


def test_a_pass_alone_breaks_nothing() -> None:
    assert node_to_break({"n-0": gated(NodeReason.GATE_PASSED), "n-1": gated(NodeReason.UPDATING)}) is None


def test_by_reason_groups_the_nodes_with_the_untouched_last() -> None:
    conditions = {
        "n-3": None,
        "n-2": gated(NodeReason.GATE_FAILED),
        "n-1": gated(NodeReason.GATE_PASSED),
        "n-0": None,
    }
    grouped = by_reason(conditions)
    assert grouped == {
        NodeReason.GATE_FAILED: ["n-2"],
        NodeReason.GATE_PASSED: ["n-1"],
        NOT_STARTED: ["n-0", "n-3"],
    }
    assert list(grouped)[-1] == NOT_STARTED


@pytest.mark.parametrize("name", ["gpu-node-0000", "gpu-node-0001", "gpu-node-0005", "n-2"])
def test_the_gpu_broken_is_the_one_a_checks_result_lists_first(name: str) -> None:
    broken = first_listed_gpu(name, GPUS_PER_NODE)
    # Prometheus's answer to changes(...) over the node's GPUs: the metric name dropped, the
    # scrape's job added; the broken GPU's series changed once.
    series: list[dict[str, Any]] = [
        {
            "metric": {**gpu_labels(name, gpu, "NVIDIA H100 80GB HBM3"), "job": "dcgm-exporter"},
            "value": [0, "1" if gpu == broken else "0"],
        }
        for gpu in reversed(range(GPUS_PER_NODE))
    ]
    answer = {"status": "success", "data": {"resultType": "vector", "result": series}}
    values = parse_answer(answer)
    assert isinstance(values, list)
    assert values[0] == 1
