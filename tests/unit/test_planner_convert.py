"""From API manifests and fleet snapshots to the planner's inputs."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.keys import NodeReason, condition_type, cordon_key
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.planner import convert
from fleetwright.planner.node.interrupts import InterruptKind
from fleetwright.planner.node.packages import digest
from fleetwright.planner.node.state import NodePackageState, PackageRecord, PendingChange, format_annotation
from fleetwright.planner.policy.model import ApprovalStep, BatchesStep, CanaryStep, SoakStep, StrategyKind
from fleetwright.planner.rollout.snapshot import observe_fleet, observe_node

pytestmark = pytest.mark.unit


def profile() -> NodeProfile:
    return NodeProfile.from_k8s(
        {
            "apiVersion": "fleetwright.io/v1alpha1",
            "kind": "NodeProfile",
            "metadata": {"name": "gpu-host"},
            "spec": {
                "nodeSelector": {"matchLabels": {"gpu": "true"}},
                "packages": [
                    {
                        "name": "driver",
                        "version": "2.0.0",
                        "image": "ghcr.io/x/driver",
                        "interrupt": {"type": "reboot"},
                    },
                    {
                        "name": "tuning",
                        "version": "1.0.0",
                        "image": "ghcr.io/x/tuning",
                        "dependsOn": [{"name": "driver", "version": "2.0.0"}],
                        "configMap": {"sysctl.conf": "a=1"},
                        "configInterrupts": [
                            {"key": "sysctl*", "interrupt": {"type": "service", "services": ["b", "a"]}}
                        ],
                        "uninstall": {"enabled": True, "apply": True},
                    },
                ],
            },
        }
    )


def policy() -> DeploymentPolicy:
    return DeploymentPolicy.from_k8s(
        {
            "apiVersion": "fleetwright.io/v1alpha1",
            "kind": "DeploymentPolicy",
            "metadata": {"name": "p"},
            "spec": {
                "maxUnavailable": "25%",
                "steps": [
                    {"canary": {"count": 2}},
                    {"soak": {"durationSeconds": 600}},
                    {"approval": {"timeoutSeconds": 3600}},
                    {
                        "batches": {
                            "strategy": "exponential",
                            "initial": 2,
                            "growthFactor": 3,
                            "soakSeconds": 60,
                        }
                    },
                ],
                "failure": {"maxFailedNodes": 3, "failureThreshold": 2, "action": "halt"},
                "windows": [{"schedule": "0 22 * * *", "durationSeconds": 3600, "timeZone": "Europe/Berlin"}],
                "compartments": [
                    {
                        "name": "rack-a",
                        "selector": {"matchLabels": {"rack": "a"}},
                        "maxUnavailable": 1,
                        "steps": [{"batches": {"strategy": "linear", "initial": 1, "delta": 2}}],
                    }
                ],
            },
        }
    )


def test_packages_convert_with_digests_dependencies_and_interrupts() -> None:
    spec = convert.rollout_spec(profile(), policy())
    driver, tuning = spec.packages
    assert driver.interrupt.kind is InterruptKind.REBOOT
    assert driver.image == "ghcr.io/x/driver:2.0.0"
    assert tuning.depends_on == ("driver",)
    assert tuning.config == {"sysctl.conf": digest("a=1")}
    assert tuning.config_interrupts[0].interrupt.services == ("a", "b")
    assert tuning.uninstall


def test_policy_converts_steps_failure_rules_windows_and_compartments() -> None:
    rollout = convert.rollout_spec(profile(), policy()).policy
    canary, soak, approval, batches = rollout.steps
    assert isinstance(canary, CanaryStep)
    assert canary.count == 2
    assert isinstance(soak, SoakStep)
    assert soak.duration_seconds == 600
    assert isinstance(approval, ApprovalStep)
    assert approval.name == "approval-2"  # unnamed steps are named by kind and position
    assert isinstance(batches, BatchesStep)
    assert batches.strategy.kind is StrategyKind.EXPONENTIAL
    assert batches.strategy.growth_factor == 3
    assert batches.strategy.failure_threshold == 2
    assert batches.pause_seconds == 60
    assert rollout.max_unavailable.resolve(8) == 2
    assert rollout.failure.max_failed_nodes == 3
    assert rollout.windows[0].timezone == "Europe/Berlin"
    (rack,) = rollout.compartments
    assert rack.max_unavailable is not None
    assert rack.max_unavailable.resolve(10) == 1
    rack_batches = rollout.compartment_steps("rack-a")[0]
    assert isinstance(rack_batches, BatchesStep)
    assert rack_batches.strategy.delta == 2
    assert rollout.compartment_steps("default") == (batches,)
    assert rollout.gate_steps() == (canary, soak, approval)


def test_targets_follow_the_node_selector() -> None:
    assert convert.targets(profile(), {"gpu": "true"})
    assert not convert.targets(profile(), {"gpu": "false"})


def node(name: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gpu": "true"}, "annotations": annotations},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "GpuHealthy", "status": "False"}]
        },
    }


def test_observing_a_node_reads_state_cordons_and_other_profiles() -> None:
    own_key, own = format_annotation(
        NodePackageState(profile="gpu-host", packages={"driver": PackageRecord(version="1.0.0")})
    )
    other_key, other = format_annotation(
        NodePackageState(
            profile="agent",
            packages={"x": PackageRecord(version="1.0.0", pending=PendingChange(version="2.0.0"))},
        )
    )
    foreign = observe_node(node("a", {own_key: own, other_key: other}, unschedulable=True), "gpu-host")
    assert foreign.unschedulable  # nobody from this profile cordoned it
    assert foreign.disruptions == ("profile/agent in progress",)
    assert foreign.packages == {"driver": PackageRecord(version="1.0.0")}
    assert foreign.conditions["GpuHealthy"] == "False"
    assert foreign.ready
    ours = observe_node(node("b", {cordon_key("gpu-host"): "true"}, unschedulable=True), "gpu-host")
    assert not ours.unschedulable
    assert ours.packages == {}


@pytest.mark.parametrize(
    ("reason", "cordoned", "expected"),
    [
        (NodeReason.GATE_FAILED, True, True),
        (NodeReason.HARDWARE_SUSPECT, True, True),
        (NodeReason.GATE_FAILED, False, False),  # released, or someone else's cordon only
        (NodeReason.FAILED, True, False),  # a stage failed: its health was never shown bad
        (NodeReason.RELEASED, False, False),
    ],
)
def test_a_node_whose_health_gate_failed_is_seen_by_its_condition_and_our_cordon(
    reason: str, cordoned: bool, expected: bool
) -> None:
    annotations = {cordon_key("gpu-host"): "true"} if cordoned else {}
    manifest = node("a", annotations, unschedulable=cordoned)
    manifest["status"]["conditions"].append(
        {"type": condition_type("gpu-host"), "status": "True", "reason": reason}
    )
    assert observe_node(manifest, "gpu-host").gate_failed is expected
    assert observe_node(manifest, "other-profile").gate_failed is False


def test_equal_annotations_give_equal_state_keys_and_selection_filters() -> None:
    key, value = format_annotation(NodePackageState(profile="gpu-host"))
    nodes = [node("b", {key: value}), node("a", {key: value}), {"metadata": {"name": "c", "labels": {}}}]
    observed = observe_fleet(nodes, "gpu-host", lambda labels: labels.get("gpu") == "true")
    assert [o.name for o in observed] == ["a", "b"]
    assert observed[0].packages_key == observed[1].packages_key
