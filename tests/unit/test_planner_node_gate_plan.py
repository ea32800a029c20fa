"""The plan preview with a policy's node gate: its validations, checks and external validators
named, and every node that needs work drained when the gate validates nodes (its validations need
the node to themselves), whatever the node's interrupt."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetwright.api.health import ExternalValidator, MetricCheck, ResolvedGate, ValidationContainer
from fleetwright.planner.rollout.preview import Plan, PlannedNode, with_node_gate
from fleetwright.planner.rollout.state import Phase

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
CHECK = MetricCheck(name="xid", query="up", success_condition="all(r == 0 for r in result)", count=3)
VALIDATION = ValidationContainer.model_validate(
    {"name": "dcgm-diag", "image": "ghcr.io/example/gpu-health:1.0.0", "args": ["diag"]}
)
EXTERNAL = ExternalValidator.model_validate(
    {"name": "burn-in", "conditionType": "BurnInPassed", "timeoutSeconds": 600}
)


def node(name: str) -> PlannedNode:
    return PlannedNode(
        node=name,
        compartment="default",
        scope="default",
        batch=1,
        start=NOW,
        end=NOW,
        expected_seconds=60,
        steps=("tuning:config",),
        interrupt="none",
        drain=False,
        reboot=False,
    )


PLAN = Plan(
    profile="gpu",
    target="t-1",
    generated_at=NOW,
    max_unavailable=1,
    targeted=3,
    needs_work=2,
    drains=0,
    reboots=0,
    nodes=(node("n1"), node("n2")),
    phase=Phase.COMPLETE,
    message="",
)


def test_a_gate_without_validations_is_named_and_drains_nothing() -> None:
    gated = with_node_gate(PLAN, ResolvedGate(checks=(CHECK,), external=(EXTERNAL,)))
    assert gated.node_gate == (CHECK.describe(), EXTERNAL.describe())
    assert gated.drains == 0
    assert not any(n.drain for n in gated.nodes)


def test_a_gate_that_validates_drains_every_node_that_needs_work() -> None:
    gated = with_node_gate(PLAN, ResolvedGate(validations=(VALIDATION,), checks=(CHECK,)))
    assert gated.node_gate == (f"validation {VALIDATION.describe()}", CHECK.describe())
    assert gated.drains == PLAN.needs_work == 2
    assert all(n.drain for n in gated.nodes)


def test_no_gate_changes_nothing() -> None:
    assert with_node_gate(PLAN, ResolvedGate()) == PLAN
