"""The pure parts of the operator CLI: the status view (node states, ordering, counts), its tree
rendering (blocked reasons with pod and PDB verbatim), the profile list, the history's record text,
the logs' Job choice and ``-o`` handling."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from rich.console import Console
from typer.testing import CliRunner

from fleetwright.api.keys import condition_type, cordon_key, status_label_key, unit_wait_condition_type
from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from fleetwright.cli.history import describe_record, recorded
from fleetwright.cli.logs import choose
from fleetwright.cli.session import Output, check_output, emit
from fleetwright.cli.statusview import RolloutView, profile_lines, render, rollout_view
from fleetwright.kube.stagelogs import StageJobFacts
from fleetwright.local import examples
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import (
    Before,
    NodePackageState,
    PackageRecord,
    PendingChange,
    format_annotation,
)
from fleetwright.planner.rollout.spec import RollbackOf
from fleetwright.workflows.payloads import Progress

pytestmark = pytest.mark.unit
load_all()  # every command registered on the app

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
PROFILE = examples.profile("gpu", version="1.0.0", selector={"pool": "a"})
PDB_MESSAGE = (
    "drain of n1: train/trainer-0: PodDisruptionBudget (Cannot evict pod as it would violate the pod's "
    "disruption budget.; The disruption budget trainer-pdb needs 1 healthy pods and has 1 currently)"
)


def node(
    name: str,
    *,
    label: str | None = None,
    reason: str = "",
    message: str = "",
    version: str | None = None,
    cordoned: bool = False,
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if version is not None:
        key, value = format_annotation(
            NodePackageState(profile="gpu", packages={"tuning": PackageRecord(version=version)})
        )
        annotations[key] = value
    if cordoned:
        annotations[cordon_key("gpu")] = "true"
    conditions = [{"type": condition_type("gpu"), "status": "False", "reason": reason, "message": message}]
    return {
        "metadata": {
            "name": name,
            "labels": {status_label_key("gpu"): label} if label else {},
            "annotations": annotations,
        },
        "spec": {"unschedulable": cordoned},
        "status": {"conditions": conditions if reason else []},
    }


def progress(**changes: Any) -> Progress:
    base = Progress(
        profile="gpu",
        phase="Progressing",
        message="rollout: canary 0/1 done",
        step="rollout: canary",
        targeted=4,
        updated=1,
        running=1,
        target="abc",
        generation=1,
        max_unavailable=2,
    )
    return base.model_copy(update=changes)


def rendered(view: RolloutView, *, width: int = 400) -> str:
    """The text of the tree ``render`` draws for ``view`` at ``NOW``, ``width`` columns wide."""
    console = Console(record=True, width=width)
    render(view, console, NOW)
    return console.export_text()


def test_each_node_gets_the_rollouts_view_first_then_its_own_records() -> None:
    nodes = [
        node("n1", label="Blocked", reason="DrainBlocked", message=PDB_MESSAGE, cordoned=True),
        node("n2", label="Complete", version="1.0.0"),
        node("n3", label="Failed", reason="StageFailed", message="apply of tuning failed (Failed)"),
        node("n4", label="Complete", version="0.9.0"),  # an older target: not updated
    ]
    view = rollout_view(
        PROFILE,
        progress(running_nodes=("n1",), failed_nodes=("n3",), failed=1),
        nodes,
        {},
        workflow_id="nodeprofile/gpu",
    )
    states = [(line.node, line.state) for line in view.nodes]
    assert states == [("n3", "Failed"), ("n1", "Blocked"), ("n4", "Pending"), ("n2", "Updated")]
    blocked = view.nodes[1]
    assert (blocked.stage, blocked.reason, blocked.cordoned) == ("drain", "DrainBlocked", True)
    assert view.blocked == 1  # a drain that waits counts as blocked though its node workflow runs
    assert view.failed == 1


def test_a_running_stage_job_names_the_stage_and_a_planner_block_its_reason() -> None:
    nodes = [node("n1", label="InProgress", reason="Drained"), node("n2")]
    view = rollout_view(
        PROFILE,
        progress(running_nodes=("n1",), blocked_nodes=("n2",), blocked_reasons={"n2": "node is NotReady"}),
        nodes,
        {"n1": "interrupt tuning"},
        workflow_id="nodeprofile/gpu",
    )
    by_node = {line.node: line for line in view.nodes}
    assert (by_node["n1"].state, by_node["n1"].stage) == ("Updating", "interrupt tuning")
    assert (by_node["n2"].state, by_node["n2"].message) == ("Blocked", "node is NotReady")


def test_without_published_progress_the_view_says_so() -> None:
    view = rollout_view(PROFILE, None, [node("n1")], {}, workflow_id="nodeprofile/gpu")
    assert view.phase == "Pending"
    assert "controller" in view.message
    assert view.targeted == 1


def test_the_tree_shows_step_counts_eta_and_the_blocking_pdb_and_pod_verbatim() -> None:
    nodes = [node("n1", label="Blocked", reason="DrainBlocked", message=PDB_MESSAGE, cordoned=True)]
    view = rollout_view(
        PROFILE,
        progress(running_nodes=("n1",)),
        nodes,
        {},
        workflow_id="nodeprofile/gpu",
        eta=NOW + timedelta(minutes=75),
        eta_note="planner estimate",
    )
    text = rendered(view)
    assert "NodeProfile gpu  Progressing — rollout: canary 0/1 done" in text
    assert "step: rollout: canary" in text
    assert "1/4 updated, 1 running, 0 waiting, 1 blocked, 0 failed (maxUnavailable 2)" in text
    assert "ETA: 2026-11-29T21:15:00+00:00 (in 1h15m; planner estimate)" in text
    assert "n1  Blocked  drain  cordoned  — DrainBlocked: " + PDB_MESSAGE in text


def test_the_profile_list_reads_the_mirrored_status_and_the_pause_annotation() -> None:
    objects: list[dict[str, Any]] = [
        {
            "metadata": {"name": "b", "annotations": {"fleetwright.io/paused": "true"}},
            "status": {"phase": "Progressing", "progress": "1/3", "nodesBlocked": 1},
        },
        {"metadata": {"name": "a"}},
    ]
    lines = profile_lines(objects, "fleetwright.io/paused")
    assert [(x.profile, x.phase, x.paused, x.blocked) for x in lines] == [
        ("a", "Pending", False, 0),
        ("b", "Progressing", True, 1),
    ]


def test_history_describes_records_with_pending_changes_and_failures() -> None:
    pending = PendingChange(version="1.1.0", stages=(Stage.UPGRADE, Stage.CONFIG), done=(Stage.UPGRADE,))
    record = PackageRecord(
        version="1.0.0", pending=pending.model_copy(update={"failed": "config-check exited 1"})
    )
    assert describe_record(record) == (
        "1.0.0; changing to 1.1.0 (stages done: upgrade); failed: config-check exited 1"
    )
    key, value = format_annotation(NodePackageState(profile="gpu", packages={"tuning": record}))
    found = recorded({"metadata": {"annotations": {key: value, "fleetwright.io/state.bad": "{"}}})
    assert [r.profile for r in found] == ["bad", "gpu"]
    assert found[0].condition.startswith("unreadable")


def test_logs_take_the_newest_job_or_all() -> None:
    jobs = [
        StageJobFacts("ns", name, "gpu", "n1", "tuning", name, None, "Complete")
        for name in ("apply", "config", "interrupt")
    ]
    assert [j.name for j in choose(jobs, False)] == ["interrupt"]
    assert [j.name for j in choose(jobs, True)] == ["apply", "config", "interrupt"]


def test_output_formats(capsys: pytest.CaptureFixture[str]) -> None:
    data = progress()
    emit(data, Output.JSON, lambda _: None)
    assert json.loads(capsys.readouterr().out)["step"] == "rollout: canary"
    emit([data], Output.YAML, lambda _: None)
    assert yaml.safe_load(capsys.readouterr().out)[0]["profile"] == "gpu"
    with pytest.raises(typer.Exit):
        check_output("wide")
    assert "-o/--output must be table, json or yaml, not 'wide'" in capsys.readouterr().err


def test_plan_prints_yaml_too(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(PROFILE.model_dump(mode="json", by_alias=True, exclude_none=True)))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(examples.policy("careful").model_dump(mode="json", by_alias=True, exclude_none=True))
    )
    items = [node("n1"), node("n2"), node("other")]
    for item in items[:2]:
        item["metadata"]["labels"] = {"pool": "a"}
    fleet = tmp_path / "nodes.json"
    fleet.write_text(json.dumps({"kind": "NodeList", "items": items}))
    result = CliRunner().invoke(
        app,
        ["plan", str(profile), str(policy), "--fleet", str(fleet), "--now", NOW.isoformat(), "-o", "yaml"],
    )
    assert result.exit_code == 0, result.output
    plan = yaml.safe_load(result.stdout)
    assert plan["profile"] == "gpu"
    assert plan["targeted"] == 2


def test_nodes_waiting_for_the_budget_are_waiting_and_a_foreign_cordon_holding_it_is_named() -> None:
    own = "Budget: maxUnavailable 1 reached: n1 (being updated by this profile)"
    foreign = "Budget: maxUnavailable 1 reached: n9 (cordoned by someone else)"
    healthy = rollout_view(
        PROFILE,
        progress(running_nodes=("n1",), running=1, waiting=1, waiting_reasons={"n2": own}),
        [node("n1", label="InProgress"), node("n2")],
        {},
        workflow_id="nodeprofile/gpu",
    )
    assert [(line.node, line.state) for line in healthy.nodes] == [("n1", "Updating"), ("n2", "Waiting")]
    assert (healthy.blocked, healthy.waiting) == (0, 1)  # waiting for its own update is no problem
    stuck = rollout_view(
        PROFILE,
        progress(phase="Blocked", blocked=1, blocked_nodes=("n2",), blocked_reasons={"n2": foreign}),
        [node("n2")],
        {},
        workflow_id="nodeprofile/gpu",
    )
    assert (stuck.phase, stuck.blocked, stuck.nodes[0].message) == ("Blocked", 1, foreign)
    assert "n9 (cordoned by someone else)" in rendered(stuck, width=200)


def test_a_node_held_for_its_workload_unit_beyond_the_listed_waits_shows_its_own_condition() -> None:
    # The rollout lists a bounded number of waiting nodes; n3 is not among them, yet it carries
    # the unit-wait condition the rollout wrote: status shows that wait, not a bare Pending.
    held = node("n3")
    why = "node n3 waits for n4 of unit train/llm (NotReady) since 19:50, at most until 20:20"
    held["status"]["conditions"].append(
        {
            "type": unit_wait_condition_type("gpu"),
            "status": "True",
            "reason": "WaitingForUnit",
            "message": why,
        }
    )
    ended = node("n5")  # a wait that ended: the condition gone, the node is Pending again
    view = rollout_view(
        PROFILE,
        progress(waiting=2, waiting_reasons={"n2": "Budget: maxUnavailable 1 reached: n1"}),
        [node("n2"), held, ended],
        {},
        workflow_id="nodeprofile/gpu",
    )
    lines = {line.node: line for line in view.nodes}
    assert (lines["n3"].state, lines["n3"].message) == ("Waiting", f"WaitingForUnit: {why}")
    assert lines["n5"].state == "Pending"
    assert lines["n2"].state == "Waiting"


def test_the_cli_says_the_phase_the_nodeprofile_status_says() -> None:
    halted = rollout_view(PROFILE, progress(phase="Halted"), [], {}, workflow_id="nodeprofile/gpu")
    waiting = rollout_view(PROFILE, progress(phase="Waiting"), [], {}, workflow_id="nodeprofile/gpu")
    assert (halted.phase, waiting.phase) == ("Halted", "Progressing")


def test_a_rollback_shows_nodes_still_to_return_as_pending_and_the_others_as_previous() -> None:
    of = RollbackOf(target="t-new", since=NOW, reason="1 node(s) failed")
    changed = node("n1", label="Complete", version="1.1.0")
    record = PackageRecord(version="1.1.0", before=Before(target="t-new", since=NOW, version="1.0.0"))
    key, value = format_annotation(NodePackageState(profile="gpu", packages={"tuning": record}))
    changed["metadata"]["annotations"][key] = value
    nodes = [changed, node("n2", label="Complete", version="1.0.0")]
    rolling = progress(phase="RollingBack", generation=2, rolled_back_generation=2, rolled_back=of)
    view = rollout_view(PROFILE, rolling, nodes, {}, workflow_id="nodeprofile/gpu")
    assert [(line.node, line.state) for line in view.nodes] == [("n1", "Pending"), ("n2", "Previous")]
    text = rendered(view, width=200)
    assert "RollingBack" in text
    assert "generation 2 (rolling back generation 2)" in text


def test_a_node_at_its_health_gate_shows_the_gate_and_an_inconclusive_one_waits_named() -> None:
    measuring = "health gate for 20s: xid Running (1/3, last Successful [0])"
    waiting = "health gate inconclusive: ...; waiting for `fleetwright approve gpu gate/n2` (or abort)"
    nodes = [
        node("n1", label="InProgress", reason="HealthGate", message=measuring, cordoned=True),
        node("n2", label="Blocked", reason="HealthGateInconclusive", message=waiting, cordoned=True),
    ]
    view = rollout_view(
        PROFILE, progress(running_nodes=("n1", "n2"), running=2), nodes, {}, workflow_id="nodeprofile/gpu"
    )
    by_node = {line.node: line for line in view.nodes}
    assert (by_node["n1"].state, by_node["n1"].stage, by_node["n1"].message) == (
        "Updating",
        "health gate",
        measuring,
    )
    assert (by_node["n2"].state, by_node["n2"].stage) == ("Blocked", "health gate")
    assert "gate/n2" in by_node["n2"].message
    assert view.blocked == 1  # the Inconclusive one waits for a human


def test_a_node_held_while_prometheus_does_not_answer_shows_the_gate_and_the_reason() -> None:
    held = (
        "health gate MonitoringUnavailable: xid MonitoringUnavailable (1/3, last Error no answer, "
        "5 Error(s) in a row): PrometheusUnavailable: timed out; measuring every 30s until "
        "Prometheus answers, or `fleetwright approve gpu gate/n1` (or abort)"
    )
    nodes = [node("n1", label="Blocked", reason="MonitoringUnavailable", message=held, cordoned=True)]
    view = rollout_view(
        PROFILE, progress(running_nodes=("n1",), running=1), nodes, {}, workflow_id="nodeprofile/gpu"
    )
    (line,) = view.nodes
    assert (line.state, line.stage, line.reason) == ("Blocked", "health gate", "MonitoringUnavailable")
    assert "PrometheusUnavailable: timed out" in line.message


def test_status_shows_the_digests_the_generation_runs() -> None:
    digest = "sha256:" + "d" * 64
    images = {
        "ghcr.io/x/tuning:1.0.0": f"ghcr.io/x/tuning@{digest}",
        "ghcr.io/x/agent:0.1.0": "ghcr.io/x/agent:0.1.0",
    }
    view = rollout_view(PROFILE, progress(images=images), [], {}, workflow_id="nodeprofile/gpu")
    assert view.images == images
    text = rendered(view)
    assert "images (pinned for this generation)" in text
    assert f"ghcr.io/x/tuning:1.0.0 → {digest}" in text
    assert "ghcr.io/x/agent:0.1.0 → not pinned" in text


def test_status_names_the_images_whose_signature_only_warned() -> None:
    digest = "sha256:" + "d" * 64
    warnings = {"ghcr.io/x/tuning:1.0.0": f"{digest}: no cosign signature (sha256-{'d' * 64}.sig has none)"}
    view = rollout_view(PROFILE, progress(image_warnings=warnings), [], {}, workflow_id="nodeprofile/gpu")
    assert view.image_warnings == warnings
    text = rendered(view)
    assert "image signatures (warn: rolled out anyway)" in text
    assert f"ghcr.io/x/tuning:1.0.0: {digest}: no cosign signature" in text
