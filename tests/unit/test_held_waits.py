"""A running node whose node workflow is held in a wait (a drain blocked by a PodDisruptionBudget,
protected pods, an image that does not pull, a node gate held while Prometheus does not answer)
counts as blocked in the rollout's progress, and so
in the NodeProfile's Blocked condition, nodesBlocked and node issues."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.activities.rollout import held_waits
from fleetwright.api.keys import NodeReason, condition_type
from fleetwright.controller.profilestatus import Inputs, derive
from fleetwright.workflows.payloads import Progress

pytestmark = pytest.mark.unit

PROFILE = "tuning"
DRAIN_MESSAGE = (
    "drain of gpu-1: default/trainer-0: Cannot evict pod as it would violate the pod's disruption "
    "budget (pdb/trainer-pdb)"
)


def node(name: str, *conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                *({"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions),
            ]
        },
    }


def test_a_running_node_whose_drain_a_pdb_holds_is_held_with_the_pod_and_the_pdb() -> None:
    own = condition_type(PROFILE)
    nodes = [
        node("gpu-1", (own, "False", NodeReason.DRAIN_BLOCKED, DRAIN_MESSAGE)),
        node("gpu-2", (own, "Unknown", NodeReason.DRAINED, "drained")),
        node("gpu-3", (own, "False", NodeReason.IMAGE_PULL_WAITING, "image ghcr.io/x not pulled yet")),
        node(
            "gpu-4", (condition_type("other"), "False", NodeReason.DRAIN_BLOCKED, "another profile's drain")
        ),
        node("gpu-5", (own, "False", NodeReason.DRAIN_BLOCKED, "an old block on a node not running here")),
    ]
    held = held_waits(nodes, PROFILE, running=["gpu-1", "gpu-2", "gpu-3", "gpu-4"])
    assert [(b.node, b.reason) for b in held] == [
        ("gpu-1", f"{NodeReason.DRAIN_BLOCKED}: {DRAIN_MESSAGE}"),
        ("gpu-3", f"{NodeReason.IMAGE_PULL_WAITING}: image ghcr.io/x not pulled yet"),
    ]


def test_a_held_running_node_sets_blocked_nodes_blocked_and_an_issue_naming_the_pdb() -> None:
    reason = f"{NodeReason.DRAIN_BLOCKED}: {DRAIN_MESSAGE}"
    progress = Progress(
        profile=PROFILE,
        phase="Progressing",
        message="batch 1",
        generation=1,
        targeted=4,
        running=1,
        blocked=1,
        running_nodes=("gpu-1",),
        blocked_nodes=("gpu-1",),
        blocked_reasons={"gpu-1": reason},
    )
    inputs = Inputs(generation=1, workflow_id="nodeprofile/tuning", policy="careful", progress=progress)
    status = derive(inputs, None, datetime(2026, 1, 1, tzinfo=UTC))
    blocked = next(c for c in status.conditions if c.type == "Blocked")
    assert blocked.status == "True"
    assert "trainer-pdb" in blocked.message
    assert "default/trainer-0" in blocked.message
    assert status.nodes_blocked == 1
    assert [(i.node, i.message) for i in status.node_issues] == [("gpu-1", reason)]


def test_a_node_gate_held_for_monitoring_is_named_in_the_rollout() -> None:
    own = condition_type(PROFILE)
    why = "health gate MonitoringUnavailable: xid MonitoringUnavailable (0/2, ...): PrometheusUnavailable"
    nodes = [node("gpu-1", (own, "False", NodeReason.MONITORING_UNAVAILABLE, why))]
    (held,) = held_waits(nodes, PROFILE, ["gpu-1"])
    assert (held.node, held.reason) == ("gpu-1", f"MonitoringUnavailable: {why}")
