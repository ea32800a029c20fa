"""Fields added since release 0.1.0 stay out of the payloads of a rollout that does not use them,
so the previous release's workers, which refuse unknown fields, read what this one writes
(docs/upgrading.md); set, they round-trip."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic_core import to_json

from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.node.work import NodeWork
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.state import FailedNode, NodeStart, RolloutState, RunningNode
from fleetwright.workflows.payloads import RolloutInput

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ADDED = (
    "workload_label",
    "workloadLabel",
    "workload_wait",
    "workloadWait",
    "held_for_workloads",
    "node_gate",
    "nodeGate",
)
WAIT = {"selector": {"matchLabels": {"app": "train"}}, "timeoutSeconds": 600}


def keys(value: object) -> set[str]:
    found: set[str] = set()
    stack = [json.loads(to_json(value))]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found |= set(item)
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return found


def test_unused_new_fields_are_left_out_of_the_payloads() -> None:
    policy = examples.policy()
    state = begin(convert.rollout_spec(examples.profile(), policy), T0)
    rollout = RolloutInput(profile=examples.profile(), policy=policy)
    assert not keys(state) & set(ADDED)
    assert not keys(rollout) & set(ADDED)


def test_used_new_fields_are_written_and_read_back() -> None:
    policy = examples.policy(workload_label="example.com/run", workload_wait=WAIT)
    state = begin(convert.rollout_spec(examples.profile(), policy), T0)
    state = state.model_copy(update={"held_for_workloads": {"gpu-1": T0}})
    assert {"workload_label", "workload_wait", "held_for_workloads"} <= keys(state)
    assert RolloutState.model_validate_json(to_json(state)) == state
    rollout = RolloutInput(profile=examples.profile(), policy=policy)
    assert RolloutInput.model_validate_json(to_json(rollout)) == rollout


def test_a_node_gate_of_any_kind_is_written_into_the_rollout_spec() -> None:
    # An external validator alone: no check, so no gate duration either; the spec still says so.
    policy = examples.policy()
    external = {"name": "burn-in", "annotation": "example.com/burn-in", "timeoutSeconds": 60}
    spec = policy.spec.model_dump(by_alias=True, exclude_none=True) | {"nodeGate": {"external": [external]}}
    gated = policy.model_copy(update={"spec": type(policy.spec).model_validate(spec)})
    state = begin(convert.rollout_spec(examples.profile(), gated), T0)
    assert state.spec.policy.node_gate
    assert "node_gate" in keys(state)
    assert RolloutState.model_validate_json(to_json(state)) == state


def test_the_quarantine_fields_are_written_only_for_a_re_gated_node() -> None:
    plain = RunningNode(node="gpu-1", scope="rollout", batch=1, started_at=T0)
    failed = FailedNode(node="gpu-1", scope="rollout")
    assert not keys(plain) & {"regate"}
    assert not keys(failed) & {"suspect"}
    regated = plain.model_copy(update={"regate": True})
    suspect = failed.model_copy(update={"suspect": True})
    assert RunningNode.model_validate_json(to_json(regated)) == regated
    assert FailedNode.model_validate_json(to_json(suspect)) == suspect
    start = NodeStart(
        node="gpu-1", scope="rollout", compartment="default", batch=1, work=NodeWork(), expected_seconds=1
    )
    assert "regate" not in keys(start)
    assert NodeStart.model_validate_json(to_json(start.model_copy(update={"regate": True}))).regate
