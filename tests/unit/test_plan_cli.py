"""``fleetwright plan`` on the sample 200-node fleet: a readable table, JSON that round-trips
through the planner's models, and clear errors."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from fleetwright.cli.plan import load_fleet, load_inputs
from fleetwright.planner import convert
from fleetwright.planner.rollout.preview import Plan, preview

pytestmark = pytest.mark.unit
load_all()  # every command registered on the app

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "tests" / "fixtures" / "fleet-200.json"
NOW = "2026-03-02T19:30:00+00:00"

PROFILE = """
apiVersion: fleetwright.io/v1alpha1
kind: NodeProfile
metadata: {name: gpu-host}
spec:
  nodeSelector: {matchLabels: {nvidia.com/gpu.present: "true"}}
  deploymentPolicyRef: {name: gpu-careful}
  packages:
    - name: nvidia-driver
      version: 560.35.3
      image: ghcr.io/example/packages/nvidia-driver
      interrupt: {type: reboot}
    - name: sysctl-tuning
      version: 1.2.0
      image: ghcr.io/example/packages/sysctl-tuning
      interrupt: {type: service, services: [systemd-sysctl.service]}
      configMap:
        sysctl.conf: "vm.max_map_count=1048576\\nnet.core.rmem_max=268435456\\n"
        limits.conf: "* - nofile 1048576\\n"
      configInterrupts:
        - key: "sysctl*"
          interrupt: {type: service, services: [systemd-sysctl.service]}
    - name: crash-dump
      version: 0.4.0
      image: ghcr.io/example/packages/crash-dump
      dependsOn: [{name: nvidia-driver, version: 560.35.3}]
"""

POLICY = """
apiVersion: fleetwright.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: gpu-careful}
spec:
  maxUnavailable: "10%"
  steps:
    - canary: {count: 2}
    - soak: {durationSeconds: 1800}
    - name: go
      approval: {}
    - batches: {strategy: exponential, initial: 2, growthFactor: 2}
  failure: {maxFailedNodes: 2, action: halt}
  windows:
    - {schedule: "0 20 * * *", durationSeconds: 36000, timeZone: Europe/Berlin}
  compartments:
    - name: gb200
      selector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-GB200}}
      maxUnavailable: 4
      steps:
        - batches: {strategy: linear, initial: 1, delta: 1}
"""


@pytest.fixture
def manifests(tmp_path: Path) -> tuple[Path, Path]:
    profile = tmp_path / "profile.yaml"
    policy = tmp_path / "policy.yaml"
    profile.write_text(PROFILE)
    policy.write_text(POLICY)
    return profile, policy


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", *args])
    return result.exit_code, result.stdout, result.stderr


def test_the_fixture_is_what_its_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_fleet", ROOT / "bench" / "make_fleet.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert FLEET.read_text() == json.dumps(module.fleet(200), indent=1, sort_keys=True) + "\n"


def test_table_output_shows_batches_stages_drains_blocked_nodes_and_eta(manifests: tuple[Path, Path]) -> None:
    code, out, _ = run(*map(str, manifests), "--fleet", str(FLEET), "--now", NOW)
    assert code == 0, out
    assert "Plan for NodeProfile gpu-host" in out
    assert "200 targeted nodes, 180 need work, 180 need a drain, 160 a reboot; maxUnavailable 20" in out
    assert "canary" in out
    assert "interrupt(reboot):nvidia-driver,sysctl-tuning" in out
    assert "ETA: 2026-03-03" in out
    for reason in ("NotReady", "FailedEarlier", "Busy: profile/security-agent"):
        assert reason in out
    assert "rollout/go" in out  # the approval gate on the way


def test_json_output_round_trips_and_matches_the_planner(manifests: tuple[Path, Path]) -> None:
    code, out, _ = run(*map(str, manifests), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    assert code == 0, out
    plan = Plan.model_validate_json(out)
    assert Plan.model_validate_json(plan.model_dump_json()) == plan
    profile, policy = load_inputs(list(manifests))
    direct = preview(
        convert.rollout_spec(profile, policy), load_fleet(FLEET, profile), datetime.fromisoformat(NOW)
    )
    assert plan == direct
    # What the plan says is coherent: every node at most once, the canary first, caps held.
    names = [n.node for n in plan.nodes]
    assert len(names) == len(set(names))
    assert plan.batches[0].number == 0
    assert all(b.start >= plan.batches[0].end for b in plan.batches[1:])
    assert {b.node for b in plan.blocked}.isdisjoint(names)
    assert len(names) + len(plan.blocked) == plan.needs_work
    for moment in {n.start for n in plan.nodes}:
        busy = [n for n in plan.nodes if n.start <= moment < n.end]
        assert len(busy) <= plan.max_unavailable
        assert sum(1 for n in busy if n.compartment == "gb200") <= 4


def test_an_unreadable_live_cluster_gives_a_clear_error(manifests: tuple[Path, Path], tmp_path: Path) -> None:
    missing = tmp_path / "kubeconfig"
    code, _, err = run(*map(str, manifests), "--kubeconfig", str(missing))
    assert code == 2
    assert f"{missing}: cannot read the nodes" in " ".join(err.split())


def test_the_fleet_comes_from_exactly_one_source(manifests: tuple[Path, Path]) -> None:
    code, _, err = run(*map(str, manifests))
    assert code == 2
    assert "either --fleet SNAPSHOT" in err


def test_a_dependency_cycle_is_reported_not_planned(manifests: tuple[Path, Path], tmp_path: Path) -> None:
    cyclic = PROFILE.replace(
        "      interrupt: {type: reboot}\n",
        "      interrupt: {type: reboot}\n      dependsOn: [{name: crash-dump, version: 0.4.0}]\n",
        1,
    )
    profile = tmp_path / "profile.yaml"
    profile.write_text(cyclic)
    code, _, err = run(str(profile), str(manifests[1]), "--fleet", str(FLEET), "--now", NOW)
    assert code == 2
    assert "cycle" in err


def test_a_missing_fleet_or_profile_is_an_error(manifests: tuple[Path, Path], tmp_path: Path) -> None:
    code, _, err = run(*map(str, manifests))
    assert code == 2
    assert "--fleet" in err
    code, _, err = run(str(manifests[1]), "--fleet", str(FLEET))
    assert code == 2
    assert "exactly one NodeProfile" in err


# What the fixture's nodes mostly carry: the driver one version behind, the older sysctl config.
PREVIOUS = PROFILE.replace("version: 560.35.3", "version: 550.90.7", 1).replace(
    "vm.max_map_count=1048576\\nnet.core.rmem_max=268435456\\n", "vm.max_map_count=262144\\n"
)


def test_rollback_previews_the_reverse_plan_under_the_same_budget(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    previous = tmp_path / "previous.yaml"
    previous.write_text(PREVIOUS)
    args = (
        *map(str, manifests),
        "--fleet",
        str(FLEET),
        "--now",
        NOW,
        "--rollback",
        "--previous",
        str(previous),
    )
    code, out, err = run(*args, "-o", "json")
    assert code == 0, out + err
    plan = Plan.model_validate_json(out)
    profile, policy = load_inputs(list(manifests))
    assert plan.rollback_of == convert.rollout_spec(profile, policy).target
    # Only nodes no rollout could reach stay (NotReady, another profile at work): the rest return.
    assert plan.phase.value == "RollingBack"
    assert {b.reason.split(":")[0] for b in plan.blocked} <= {"NotReady", "Busy"}
    steps = {n.node: n.steps for n in plan.nodes}
    # gpu-node-000: driver upgraded and sysctl reconfigured -> the driver's lower version is applied
    # again, with its reboot merged with the sysctl service restart.
    assert steps["gpu-node-000"][0] == "nvidia-driver:apply"
    assert "interrupt(reboot):nvidia-driver,sysctl-tuning" in steps["gpu-node-000"]
    assert steps["gpu-node-007"][:1] == ("sysctl-tuning:config",)  # only its config was changed
    assert all(s.endswith(":uninstall") or "uninstall-interrupt" in s for s in steps["gpu-node-009"])
    assert "gpu-node-008" not in steps  # already current: the rollout would not have changed it
    assert "gpu-node-041" not in steps  # failed earlier: the rollout would not have started it
    assert all(n.batch != 0 for n in plan.nodes)  # no canary: a rollback skips the gates
    for moment in {n.start for n in plan.nodes}:
        assert sum(1 for n in plan.nodes if n.start <= moment < n.end) <= plan.max_unavailable
    code, out, _ = run(*args)
    assert code == 0
    assert "Rollback plan for NodeProfile gpu-host" in out
    code, _, err = run(*map(str, manifests), "--fleet", str(FLEET), "--rollback")
    assert code == 2
    assert "--rollback needs --previous FILE" in err


def tolerant_policy(tmp_path: Path, failure: str, compartments: str = "") -> Path:
    policy = tmp_path / "tolerant.yaml"
    policy.write_text(
        POLICY.replace('maxUnavailable: "10%"', "maxUnavailable: 12")
        .replace("failure: {maxFailedNodes: 2, action: halt}", failure)
        .split("  compartments:")[0]
        + compartments
    )
    return policy


def test_the_plan_shows_where_failed_nodes_would_fill_the_budget_before_anything_runs(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    # Issue 37's shape: as many tolerated failures as the budget holds; left cordoned, they fill it.
    policy = tolerant_policy(tmp_path, "failure: {maxFailedNodes: 12, action: rollback}")
    code, out, _ = run(str(manifests[0]), str(policy), "--fleet", str(FLEET), "--now", NOW)
    assert code == 0, out
    assert (
        "Deadlock if nodes fail: maxUnavailable 12: once 12 nodes fail (maxFailedNodes 12 tolerates them) "
        "they stay cordoned and hold it, 168 node(s) cannot start and the rule cannot fire by count; the "
        "rollout fires rollback then"
    ) in " ".join(out.split())
    safe = tolerant_policy(tmp_path, "failure: {maxFailedNodes: 11, action: rollback}")
    code, out, _ = run(str(manifests[0]), str(safe), "--fleet", str(FLEET), "--now", NOW)
    assert code == 0, out
    assert "Deadlock" not in out


def test_the_plan_shows_a_compartment_whose_own_failures_fill_its_budget(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    compartment = """  compartments:
    - name: gb200
      selector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-GB200}}
      maxUnavailable: 1
      failure: {maxFailedNodes: 1, action: halt}
"""
    policy = tolerant_policy(tmp_path, "failure: {maxFailedNodes: 0, action: halt}", compartment)
    code, out, _ = run(str(manifests[0]), str(policy), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    assert code == 0, out
    plan = Plan.model_validate_json(out)
    assert len(plan.deadlocks) == 1, plan.deadlocks
    assert plan.deadlocks[0].startswith("compartment gb200 maxUnavailable 1: once 1 nodes fail")
    assert plan.deadlocks[0].endswith("the rollout fires halt then")


def test_the_plan_shows_the_workloads_each_batch_interrupts_and_the_gpu_hours(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    profile, policy = load_inputs(list(manifests))
    plain = preview(
        convert.rollout_spec(profile, policy), load_fleet(FLEET, profile), datetime.fromisoformat(NOW)
    )
    gang = [n.node for n in plain.nodes if n.compartment == "default" and n.batch > 0][-4:]

    def pod(node: str, owner: str) -> dict[str, object]:
        kind, name = owner.split("/")
        return {
            "metadata": {
                "name": f"{name}-{node}",
                "namespace": "ml",
                "ownerReferences": [{"kind": kind, "name": name, "controller": True}],
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
            },
            "status": {"phase": "Running"},
        }

    pods = tmp_path / "pods.json"
    items = [pod(n, "Job/train") for n in gang] + [pod(gang[0], "ReplicaSet/web")]
    pods.write_text(json.dumps({"kind": "List", "items": items}))
    args = [*map(str, manifests), "--fleet", str(FLEET), "--pods", str(pods), "--now", NOW]
    code, out, _ = run(*args, "-o", "json")
    assert code == 0, out
    plan = Plan.model_validate_json(out)
    hit = [b for b in plan.batches if b.workloads]
    assert [b.workloads for b in hit] == [("Job/ml/train",)]  # one batch, the service is no workload
    assert set(gang) <= set(hit[0].nodes)
    spans = [(n.start, n.end) for n in plan.nodes if n.node in gang]
    # The whole gang's GPUs, from its first node's drain to its last node's end.
    hours = 32 * (max(e for _, e in spans) - min(s for s, _ in spans)).total_seconds() / 3600
    assert hit[0].gpu_hours == pytest.approx(hours, abs=0.01)
    assert plan.workloads == 1
    assert plan.gpu_hours_lost == pytest.approx(hours, abs=0.1)
    code, out, _ = run(*args)
    assert code == 0, out
    assert "Workloads: 1 of 1 interrupted; expected GPU-hours lost" in out
    assert "Job/ml/train" in out
    assert "none (idle nodes)" in out
    # workloadOrder: false: the rollout reads no pods, so neither does its plan.
    manifests[1].write_text(POLICY.replace("  failure:", "  workloadOrder: false\n  failure:"))
    code, out, _ = run(*args, "-o", "json")
    assert code == 0, out
    assert Plan.model_validate_json(out).workloads == 0


def test_the_plan_shows_the_node_gate_and_counts_its_time_in_each_node(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    profile, policy = manifests
    gated = tmp_path / "gated.yaml"
    gate = """
  healthChecks:
    - name: xid
      query: 'changes(DCGM_FI_DEV_XID_ERRORS{Hostname="{{node}}"}[10m])'
      successCondition: all(r == 0 for r in result)
      count: 5
      intervalSeconds: 60
  nodeGate: {checks: [xid]}
"""
    gated.write_text(POLICY + gate)
    code, out, _ = run(str(profile), str(gated), "--fleet", str(FLEET), "--now", NOW)
    assert code == 0, out
    assert "Node gate (each node stays cordoned after its stages until these pass" in out
    assert "xid: 5 measurement(s) 60s apart" in out
    _, plain, _ = run(str(profile), str(policy), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    _, with_gate, _ = run(str(profile), str(gated), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    before, after = Plan.model_validate_json(plain), Plan.model_validate_json(with_gate)
    seconds = {n.node: n.expected_seconds for n in before.nodes}
    # The gate's four intervals plus a second per query, in every node's expected time.
    assert all(n.expected_seconds == seconds[n.node] + 245 for n in after.nodes)
    assert after.node_gate
    assert not before.node_gate


def fleet_gated(tmp_path: Path, step: str, checked: str, *, count: int, interval: int) -> Path:
    """``POLICY`` with its ``step`` replaced by ``checked`` (naming ``fleet-xid``), and that fleet
    check, ``count`` measurements ``interval`` seconds apart, written to a file in ``tmp_path``."""
    gate = f"""
  healthChecks:
    - name: fleet-xid
      query: 'sum(changes(DCGM_FI_DEV_XID_ERRORS{{Hostname=~"{{{{nodes}}}}"}}[10m]))'
      successCondition: result[0] == 0
      count: {count}
      intervalSeconds: {interval}
"""
    assert f"    - {step}\n" in POLICY, step
    path = tmp_path / "fleet-gated.yaml"
    path.write_text(POLICY.replace(f"    - {step}\n", f"    - {checked}\n") + gate)
    return path


def test_the_plan_runs_a_soaks_fleet_gate_on_its_schedule(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    profile, _ = manifests
    soak = "soak: {durationSeconds: 60, checks: [fleet-xid]}"
    gated = fleet_gated(tmp_path, "soak: {durationSeconds: 1800}", soak, count=30, interval=120)
    code, out, _ = run(str(profile), str(gated), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    assert code == 0, out
    plan = Plan.model_validate_json(out)
    canary_end = plan.batches[0].end
    second = plan.batches[1].start
    # The soak lasts as long as its checks: 29 intervals of 120 s after the canary, not 60 s.
    assert second - canary_end >= timedelta(seconds=29 * 120)
    _, plain, _ = run(*map(str, manifests), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    without = Plan.model_validate_json(plain)
    assert (plan.phase, len(plan.nodes)) == (without.phase, len(without.nodes))  # it ends as without


def test_the_plan_shows_the_background_checks_of_a_batches_step(
    manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    profile, _ = manifests
    batches = "batches: {strategy: exponential, initial: 2, growthFactor: 2"
    gated = fleet_gated(tmp_path, batches + "}", batches + ", checks: [fleet-xid]}", count=3, interval=60)
    code, out, _ = run(str(profile), str(gated), "--fleet", str(FLEET), "--now", NOW)
    assert code == 0, out
    assert "Fleet gate (over the nodes updated so far" in out
    assert "default/batches-3 (in runs while the batches run) fleet-xid: 3 measurement(s) 60s apart" in out
    _, json_out, _ = run(str(profile), str(gated), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    _, plain, _ = run(*map(str, manifests), "--fleet", str(FLEET), "--now", NOW, "-o", "json")
    plan, without = Plan.model_validate_json(json_out), Plan.model_validate_json(plain)
    assert [p for p in plan.fleet_gate if p.startswith("gb200/")] == []  # its own steps have none
    # Passing checks change nothing: the same batches at the same times.
    assert [(b.start, b.nodes) for b in plan.batches] == [(b.start, b.nodes) for b in without.batches]


def test_the_plan_shows_the_validations_and_counts_their_nodes_as_drained(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet.yaml"  # no interrupt: only the validations drain the nodes
    quiet.write_text(PROFILE.split("  packages:", maxsplit=1)[0] + QUIET_PACKAGE)
    validated = tmp_path / "validated.yaml"
    validated.write_text(
        POLICY
        + """
  nodeGate:
    validations:
      - name: dcgm-diag
        image: ghcr.io/example/gpu-health:1.0.0
        args: [diag, --level, "2"]
        timeoutSeconds: 900
        privileged: true
"""
    )
    args = ("--fleet", str(FLEET), "--now", NOW, "-o", "json")
    _, plain, _ = run(str(quiet), policy_file(tmp_path), *args)
    code, gated, err = run(str(quiet), str(validated), *args)
    assert code == 0, err
    before, after = Plan.model_validate_json(plain), Plan.model_validate_json(gated)
    assert before.drains == 0
    assert after.drains == after.needs_work > 0
    assert all(n.drain for n in after.nodes)
    assert after.node_gate == (
        "validation dcgm-diag: ghcr.io/example/gpu-health:1.0.0 diag --level 2 (at most 900s, privileged)",
    )
    code, out, _ = run(str(quiet), str(validated), "--fleet", str(FLEET), "--now", NOW)
    assert code == 0, out
    assert "validation dcgm-diag: ghcr.io/example/gpu-health:1.0.0" in out


QUIET_PACKAGE = """  packages:
    - name: sysctl-tuning
      version: 1.2.0
      image: ghcr.io/example/packages/sysctl-tuning
"""


def policy_file(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)
