"""The preflight's pure parts: which checks a node runs and who runs one, the policy field (no CRD
default, written only when set), the preflight Job (copy and check only, never retried), the
count of spared nodes in the rollout's state and status, and what ``fleetwright plan`` says."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.cli.statusview import render, rollout_view
from fleetwright.local import examples
from fleetwright.planner.convert import policy as rollout_policy
from fleetwright.planner.node.packages import PackageGraph
from fleetwright.planner.node.preflight import preflight_count, preflight_steps, runs_preflight
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import PackageRecord
from fleetwright.planner.node.work import NodeWork, plan_node
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.planner.rollout.preview import Plan
from fleetwright.stagejob.render import StageJobError, job_name
from fleetwright.stagejob.render import render as render_job
from tests.unit.test_cli_status_view import NOW, PROFILE, progress
from tests.unit.test_plan_cli import FLEET, manifests, run  # noqa: F401 (a fixture)
from tests.unit.test_plan_cli import NOW as NOW_TEXT
from tests.unit.test_planner_rollout import DRIVER, Fleet, batches, policy, started
from tests.unit.test_stagejob import spec

pytestmark = pytest.mark.unit


def reboot_work() -> NodeWork:
    return plan_node(PackageGraph((DRIVER,)), {})


def test_the_preflight_runs_the_check_of_every_stage_but_the_interrupt() -> None:
    work = reboot_work()
    assert [s.stage for s in work.steps] == [
        Stage.APPLY,
        Stage.CONFIG,
        Stage.INTERRUPT,
        Stage.POST_INTERRUPT,
    ]
    assert [s.check for s in preflight_steps(work)] == ["apply-check", "config-check", "post-interrupt-check"]


def test_only_a_node_with_checks_under_a_policy_that_asks_runs_one() -> None:
    work = reboot_work()
    converged = plan_node(PackageGraph((DRIVER,)), {"driver": PackageRecord(version="2.0.0")})
    assert runs_preflight(work, enabled=True)
    assert not runs_preflight(work, enabled=False)
    assert not runs_preflight(work, enabled=True, regate=True)  # its gate must run again
    assert not runs_preflight(converged, enabled=True)  # no work, nothing to check
    assert preflight_count([work, converged, work], enabled=True) == 2
    assert preflight_count([work], enabled=False) == 0


def test_the_policy_field_has_no_default_and_is_written_only_when_set() -> None:
    plain, asking = examples.policy(), examples.policy(preflight=True)
    assert plain.spec.preflight is None
    assert "preflight" not in plain.model_dump(by_alias=True)["spec"]
    assert asking.model_dump(by_alias=True)["spec"]["preflight"] is True
    assert rollout_policy(asking).preflight
    assert not rollout_policy(plain).preflight
    assert "preflight" not in rollout_policy(plain).model_dump()
    spec_dict = plain.spec.model_dump(by_alias=True)
    with pytest.raises(ValueError, match="preflight"):
        DeploymentPolicy.model_validate({"spec": {**spec_dict, "preflight": "sometimes"}})


def test_a_preflight_job_copies_and_checks_only_under_its_own_name_and_is_never_retried() -> None:
    job = render_job(spec(preflight=True))
    pod = job["spec"]["template"]["spec"]
    names = [c["name"] for c in pod["initContainers"]]
    assert names == ["tuning-init", "tuning-applycheck"]
    check = pod["initContainers"][1]
    assert check["args"][0] == "apply-check"
    assert {"name": "FLEETWRIGHT_PREFLIGHT", "value": "true"} in check["env"]
    # The same image, env, mounts and resources as the real stage's check container.
    real = render_job(spec())["spec"]["template"]["spec"]["initContainers"][2]
    assert check["env"][:-1] == real["env"]
    assert (check["image"], check["volumeMounts"], check["resources"]) == (
        real["image"],
        real["volumeMounts"],
        real["resources"],
    )
    assert job["spec"]["backoffLimit"] == 0
    assert job_name(spec(preflight=True)) != job_name(spec())
    with pytest.raises(StageJobError, match="preflight: an interrupt stage has no check"):
        render_job(spec(stage="interrupt", preflight=True, interrupt_data="e30="))


def test_the_rollout_counts_the_nodes_its_preflight_spared() -> None:
    fleet = Fleet(4, policy(batches(initial=4), cap=4, preflight=True))
    fleet.decide()
    fleet.set("n00", run=RunStatus.SUCCEEDED, spared=True)
    fleet.set("n01", run=RunStatus.SUCCEEDED)
    fleet.set("n02", run=RunStatus.FAILED, spared=True, message="boom")
    decision = fleet.decide()
    assert decision.state.spared == 1
    assert decision.counts.spared == 1
    assert "spared" in decision.state.model_dump()
    unused = Fleet(2, policy(batches(initial=2), cap=2))
    unused.decide()
    unused.finish_running()
    assert "spared" not in unused.decide().state.model_dump()  # the previous release reads it


def test_a_node_the_preflight_spared_gives_its_place_in_the_batch_to_another() -> None:
    # Batches of 2 (the cap) over 6 nodes: the batch is of nodes changed. Two spared nodes leave
    # it, two others take their places at once, and the batch closes only when 2 changed nodes
    # finished: the fleet takes the batches of the nodes that need the change, not of all.
    fleet = Fleet(6, policy(batches(initial=2), cap=2, preflight=True))
    first = started(fleet.decide())
    assert len(first) == 2
    fleet.set(first[0], run=RunStatus.SUCCEEDED, spared=True)
    refill = started(fleet.decide())
    assert len(refill) == 1
    assert refill[0] not in first
    (gates,) = [s for s in (fleet.state.gates, *fleet.state.compartments) if first[1] in s.current]
    assert first[0] not in gates.current
    assert gates.batch.batches == 0
    fleet.finish(first[1], *refill)
    decision = fleet.decide()
    assert fleet.state.spared == 1
    assert len(started(decision)) == 2  # batch 1 (2 changed nodes) closed, batch 2 opened
    closed = [s for s in (fleet.state.gates, *fleet.state.compartments) if s.batch.batches]
    assert closed
    assert all(s.batch.consecutive_failures == 0 for s in closed)


def test_status_shows_the_spared_nodes_only_when_there_are_some() -> None:
    def shown(spared: int) -> str:
        view = rollout_view(PROFILE, progress(spared=spared), [], {}, workflow_id="nodeprofile/gpu")
        console = Console(record=True, width=400)
        render(view, console, NOW)
        return console.export_text()

    assert "2 spared by preflight (never cordoned)" in shown(2)
    assert "spared" not in shown(0)


def test_the_plan_says_on_how_many_nodes_the_preflight_runs(
    manifests: tuple[Path, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    profile, policy_path = manifests
    asking = tmp_path / "preflight.yaml"
    asking.write_text(policy_path.read_text() + "  preflight: true\n")
    code, out, _ = run(str(profile), str(asking), "--fleet", str(FLEET), "--now", NOW_TEXT)
    assert code == 0, out
    _, as_json, _ = run(str(profile), str(asking), "--fleet", str(FLEET), "--now", NOW_TEXT, "-o", "json")
    plan = Plan.model_validate_json(as_json)
    assert plan.preflight == plan.needs_work > 0
    assert f"Preflight: runs on {plan.preflight} node(s) in service before any cordon" in out
    _, plain, _ = run(str(profile), str(policy_path), "--fleet", str(FLEET), "--now", NOW_TEXT)
    assert "Preflight" not in plain
