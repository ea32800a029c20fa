"""Example NodeProfiles and DeploymentPolicies for the local fleet: the ``tuning`` package with a
sysctl config, and a canary-then-batches policy; and a training Job bound to a node, the workload a
drain interrupts. Shared by the demo, the benchmarks, the chaos suite and the tests, so they all
roll out the same thing."""

from __future__ import annotations

from typing import Any

from fleetwright.api.common import API_VERSION
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.nodeprofile import ConfigInterrupt, NodeProfile
from fleetwright.local.nodes import OUTCOME_LABEL
from fleetwright.planner.node.packages import digest


def profile(
    name: str = "tuning",
    *,
    version: str = "1.0.0",
    interrupt: str | None = "reboot",
    selector: dict[str, str] | None = None,
    config: dict[str, str] | None = None,
    policy: str = "careful",
    extra_packages: list[dict[str, Any]] | None = None,
    generation: int = 1,
    drain: dict[str, Any] | None = None,
) -> NodeProfile:
    package: dict[str, Any] = {
        "name": "tuning",
        "version": version,
        "image": "ghcr.io/fleetwright/packages/tuning",
        "configMap": config or {"sysctl.conf": "vm.max_map_count=262144\n"},
        "stageTimeoutSeconds": 600,
    }
    if interrupt:
        package["interrupt"] = {"type": interrupt}
    spec: dict[str, Any] = {
        "packages": [package, *(extra_packages or [])],
        "deploymentPolicyRef": {"name": policy},
    }
    if drain is not None:
        spec["drain"] = drain
    if selector is None:
        spec["allNodes"] = True
    else:
        spec["nodeSelector"] = {"matchLabels": selector}
    return NodeProfile.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "NodeProfile",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": generation},
            "spec": spec,
        }
    )


def policy(
    name: str = "careful",
    *,
    max_unavailable: int | str = 2,
    steps: list[dict[str, Any]] | None = None,
    max_failed_nodes: int = 0,
    workload_label: str | None = None,
    workload_wait: dict[str, Any] | None = None,
    workload_order: bool = True,
    preflight: bool = False,
) -> DeploymentPolicy:
    spec: dict[str, Any] = {
        "maxUnavailable": max_unavailable,
        "steps": steps
        or [
            {"name": "canary", "canary": {"count": 1}},
            {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
        ],
        "failure": {"maxFailedNodes": max_failed_nodes},
    }
    if workload_label is not None:
        spec["workloadLabel"] = workload_label
    if workload_wait is not None:
        spec["workloadWait"] = workload_wait
    if not workload_order:
        spec["workloadOrder"] = False
    if preflight:
        spec["preflight"] = True
    return DeploymentPolicy.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "DeploymentPolicy",
            "metadata": {"name": name, "generation": 1},
            "spec": spec,
        }
    )


def config_interrupts(spec: dict[str, Any]) -> list[ConfigInterrupt]:
    return [ConfigInterrupt.model_validate(item) for item in spec["configInterrupts"]]


def config_digest(value: str) -> str:
    """The digest fleetwright records for a config value (what ``planner.node.packages.digest`` gives)."""
    return digest(value)


def training_job(
    name: str,
    namespace: str,
    node: str,
    *,
    labels: dict[str, str] | None = None,
    gpus: int = 8,
) -> dict[str, Any]:
    """A training Job with one pod bound to ``node`` that runs until evicted (kwok's ``hang``
    outcome; without that label kwok completes it), and fails when evicted (no retry: an
    interrupted run is the job's to restart). Pods of several such Jobs sharing a label the
    policy's ``workloadLabel`` names are one gang."""
    pod_meta: dict[str, Any] = {"labels": {**(labels or {}), OUTCOME_LABEL: "hang"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": pod_meta,
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example.com/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                },
            },
        },
    }
