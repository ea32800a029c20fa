"""What a rollout shows, without Temporal: its progress from a decision and the controls (held
running nodes listed first among the blocked, an abort that is not a pause, a pause that does not
hide a halt), the step it is at, its search attributes and the Temporal UI's details."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.node.work import plan_node
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.state import (
    BlockedNode,
    Counts,
    Decision,
    FailedNode,
    Phase,
    RolloutState,
    RunningNode,
)
from fleetwright.workflows import search as sa
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.payloads import Controls, NodeInput, RolloutInput
from fleetwright.workflows.progress import (
    NODE_COLUMNS,
    current_details,
    current_step,
    markdown_table,
    node_details,
    node_search_attributes,
    node_summary,
    rollout_details,
    rollout_progress,
    rollout_summary,
    search_attributes,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "gate", "approval": {}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
]


def state(**update: Any) -> RolloutState:
    spec = convert.rollout_spec(examples.profile("gpu"), examples.policy(steps=STEPS))
    return begin(spec, NOW).model_copy(update=update)


def running(*nodes: str) -> tuple[RunningNode, ...]:
    return tuple(RunningNode(node=n, scope="rollout", batch=0, started_at=NOW) for n in nodes)


def decision(**update: Any) -> Decision:
    base: dict[str, Any] = {
        "state": state(),
        "phase": Phase.PROGRESSING,
        "message": "rolling",
        "counts": Counts(targeted=10, needs_work=4, running=1, failed=1, blocked=2, max_unavailable=2),
    }
    return Decision(**{**base, **update})


def test_the_counts_and_nodes_of_a_decision() -> None:
    failed = (FailedNode(node="n9", scope="default", message="apply-check exited 1"),)
    shown = rollout_progress(
        decision(state=state(running=running("n1"), failed=failed)),
        controls=Controls(),
        held=(),
        generation=3,
    )
    assert (shown.profile, shown.phase, shown.message, shown.generation) == (
        "gpu",
        "Progressing",
        "rolling",
        3,
    )
    assert (shown.targeted, shown.updated, shown.running, shown.failed) == (10, 6, 1, 1)
    # Nodes whose stages are done but whose node gate has not passed are not updated yet.
    gated = decision(counts=Counts(targeted=10, needs_work=4, running=1, failed=1, unproven=2))
    assert rollout_progress(gated, controls=Controls(), held=(), generation=3).updated == 4
    assert shown.max_unavailable == 2
    assert (shown.running_nodes, shown.failed_nodes) == (("n1",), ("n9",))
    assert shown.target == state().spec.target
    assert not shown.paused
    assert not shown.deleting


def test_held_running_nodes_are_blocked_too_and_listed_first() -> None:
    waiting = tuple(BlockedNode(node=f"w{i}", reason="window closed") for i in range(30))
    held = (BlockedNode(node="n1", reason="DrainBlocked: pdb"), BlockedNode(node="gone", reason="x"))
    shown = rollout_progress(
        decision(state=state(running=running("n1")), blocked=waiting),
        controls=Controls(),
        held=held,
        generation=1,
    )
    assert shown.blocked == 2 + 1  # the decision's count, and the held node that still runs
    assert shown.blocked_nodes[:2] == ("n1", "w0")
    assert len(shown.blocked_nodes) == 20
    assert shown.blocked_reasons["n1"] == "DrainBlocked: pdb"
    assert "gone" not in shown.blocked_reasons


def test_an_aborted_rollout_is_not_shown_paused_while_its_nodes_finish() -> None:
    paused = decision(state=state(running=running("n1", "n2")), phase=Phase.PAUSED, message="paused")
    aborting = rollout_progress(paused, controls=Controls(aborted=True), held=(), generation=1)
    assert (aborting.phase, aborting.message) == ("Progressing", "aborting: waiting for 2 running node(s)")
    ended = rollout_progress(paused, controls=Controls(aborted=True), held=(), generation=1, phase="Aborted")
    assert (ended.phase, ended.message) == ("Aborted", "paused")


def test_a_pause_shows_unless_the_rollout_halted() -> None:
    controls = Controls(paused=True)
    assert rollout_progress(decision(), controls=controls, held=(), generation=1).phase == "Paused"
    halted = decision(phase=Phase.HALTED)
    assert rollout_progress(halted, controls=controls, held=(), generation=1).phase == "Halted"
    assert rollout_progress(halted, controls=controls, held=(), generation=1).paused


def test_the_current_step_is_the_gate_then_each_compartments_step_and_batch() -> None:
    assert current_step(state()) == "rollout: canary"
    past_gates = state()
    past_gates = past_gates.model_copy(update={"gates": past_gates.gates.model_copy(update={"step": 2})})
    assert current_step(past_gates) == "default: rest (batch 1)"
    default = past_gates.compartments[0]
    done = past_gates.model_copy(update={"compartments": (default.model_copy(update={"step": 1}),)})
    assert current_step(done) == "done"


def test_search_attributes_name_the_phase_packages_and_counts() -> None:
    one = decision()
    shown = rollout_progress(one, controls=Controls(), held=(), generation=1)
    updates = {u.key.name: u.value for u in search_attributes(shown, one.state.spec.packages)}
    assert updates == {
        sa.PROFILE.name: "gpu",
        sa.PHASE.name: "Progressing",
        sa.PACKAGES.name: ["tuning@1.0.0"],
        sa.NODES_DONE.name: 6,
        sa.NODES_FAILED.name: 1,
        sa.NODES_BLOCKED.name: 2,
    }


def test_search_attributes_the_namespace_lacks_are_named_in_the_progress() -> None:
    shown = rollout_progress(
        decision(),
        controls=Controls(),
        held=(),
        generation=1,
        unregistered_search_attributes=("FleetwrightNode",),
    )
    assert shown.unregistered_search_attributes == ("FleetwrightNode",)


def test_the_details_table_lists_the_running_failed_and_blocked_nodes() -> None:
    failed = tuple(FailedNode(node=f"f{i}", scope="default", message="exit 1") for i in range(12))
    blocked = (BlockedNode(node="b1", reason="window closed"),)
    one = decision(state=state(running=running("n1"), failed=failed), blocked=blocked)
    details = current_details(rollout_progress(one, controls=Controls(), held=(), generation=1), one)
    lines = details.splitlines()
    assert lines[0] == "**gpu** — Progressing: rolling"
    assert "**Step** rollout: canary" in lines
    assert "**Packages** `tuning@1.0.0`" in lines
    table = [cells(line) for line in lines if line.startswith("|")]
    assert table == [list(NODE_COLUMNS), ["--:"] * 7, ["10", "6", "1", "0", "2", "1", "2"]]
    assert '**Node workflows** `WorkflowType="fleetwright.node" AND FleetwrightProfile="gpu"`' in lines
    assert "**Running** n1" in lines
    assert [line for line in lines if line.startswith("- f")] == [f"- f{i}: exit 1" for i in range(10)]
    assert "- b1: window closed" in lines


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_table_cells_carry_padding_the_ui_renderer_keeps() -> None:
    """The UI's stylesheet gives table cells no padding, and its Markdown renderer trims ASCII
    spaces: only a wider space keeps the header words from running together."""
    header, rule, row = markdown_table(("step", "targeted"), [("done", 3)], numeric=True)
    assert header == "| \u2003step\u2003 | \u2003targeted\u2003 |"
    assert rule == "|--:|--:|"
    assert row == "| \u2003done\u2003 | \u20033\u2003 |"
    assert cells(markdown_table(("a", "b"), [])[1]) == ["---", "---"]


def test_a_rollout_is_started_with_its_profile_packages_and_policy_as_summary_and_details() -> None:
    rollout = RolloutInput(profile=examples.profile("gpu"), policy=examples.policy(steps=STEPS))
    assert rollout_summary(rollout) == "NodeProfile gpu: tuning@1.0.0 (policy careful)"
    assert rollout_details(rollout).splitlines()[:4] == [
        "**NodeProfile** `gpu` (generation 1)",
        "**Packages** `tuning@1.0.0`",
        "**Policy** `careful`: maxUnavailable 2; canary → gate (approval) → rest (batches)",
        '**Node workflows** `WorkflowType="fleetwright.node" AND FleetwrightProfile="gpu"`',
    ]


def test_a_node_workflow_is_started_with_its_node_packages_stages_and_policy() -> None:
    spec = convert.rollout_spec(examples.profile("gpu"), examples.policy(steps=STEPS))
    node = NodeInput(
        profile="gpu",
        profile_uid="uid",
        generation=3,
        target=spec.target,
        node="node-1",
        parent_workflow_id="nodeprofile/gpu",
        work=plan_node(spec.graph, {}),  # a fresh node
        desired=spec.packages,
        packages=tuple(examples.profile("gpu").spec.packages),
    )
    stages = ", ".join(s.stage.value for s in node.work.steps)
    assert stages
    assert node_summary(node) == f"node-1: tuning@1.0.0 ({stages})"
    assert node_details(node, "careful").splitlines() == [
        "**Node** `node-1`",
        "**NodeProfile** `gpu` (generation 3)",
        "**Packages** `tuning@1.0.0`",
        f"**Stages** {stages}",
        "**Policy** `careful`",
        "**Rollout** `nodeprofile/gpu`",
    ]
    assert node_search_attributes(node) == {
        "FleetwrightProfile": "gpu",
        "FleetwrightNode": "node-1",
        "FleetwrightPhase": "InProgress",
        "FleetwrightPackages": ["tuning@1.0.0"],
    }
    lacking = node.model_copy(update={"unregistered_search_attributes": ("FleetwrightNode",)})
    assert "FleetwrightNode" not in node_search_attributes(lacking)
    off = node.model_copy(update={"settings": EngineSettings(search_attributes=False)})
    assert node_search_attributes(off) == {}
