"""Rollouts for the node tier: a ``shellscript`` profile over kwok nodes plus the real node, and
reading what ran on the real node (its stage pods, and which of their containers containerd ran)."""

from __future__ import annotations

import json
from typing import Any

from fleetwright.local import examples
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from tests.support.engine import kubectl_json, label_nodes
from tests.support.stack import GROUP_LABEL

SHELLSCRIPT = "ghcr.io/fleetwright/packages/shellscript"


def apply_rollout(
    cluster: LocalCluster,
    name: str,
    scripts: dict[str, str],
    *,
    interrupt: dict[str, Any] | None = None,
    canary: str | None = None,
    node_gate: dict[str, Any] | None = None,
    runtime_required: bool = False,
) -> None:
    """A shellscript profile on the nodes labelled for ``name``; the canary is ``canary`` when
    given (the real node), then the rest one at a time. ``node_gate``: the policy's node gate."""
    package: dict[str, Any] = {
        "name": "shellscript",
        "version": "1.0.0",
        "image": SHELLSCRIPT,
        "configMap": scripts,
        "stageTimeoutSeconds": 300,
    }
    if interrupt is not None:
        package["interrupt"] = interrupt
    first = (
        {"canary": {"count": 1}}
        if canary is None
        else {"canary": {"selector": {"matchLabels": {"kubernetes.io/hostname": canary}}}}
    )
    steps = [{"name": "canary", **first}, {"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]
    policy = examples.policy(name, max_unavailable=1, steps=steps).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    policy.pop("status", None)
    if node_gate is not None:
        policy["spec"]["nodeGate"] = node_gate
    profile = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "NodeProfile",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {GROUP_LABEL: name}},
            "packages": [package],
            "deploymentPolicyRef": {"name": name},
            "runtimeRequired": runtime_required,
        },
    }
    items = {"apiVersion": "v1", "kind": "List", "items": [policy, profile]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(items))


def wait_complete(cluster: LocalCluster, name: str, timeout: int = 400) -> None:
    """Until the profile is Ready: real stage pods take seconds each, a reboot a minute."""
    cluster.kubectl(
        "wait", "--for=condition=Ready", f"nodeprofile/{name}", f"--timeout={timeout}s", timeout=timeout + 20
    )


def delete_rollout(cluster: LocalCluster, name: str) -> None:
    cluster.kubectl("delete", "nodeprofile,deploymentpolicy", name, "--wait=false", check=False)
    cluster.kubectl(
        "patch", "nodeprofile", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False
    )


def group(cluster: LocalCluster, real_node: RealNode, name: str, kwok: int) -> list[str]:
    """``kwok`` new kwok nodes and the real node, labelled as ``name``'s group."""
    nodes = [*cluster.add_nodes(kwok), real_node.options.name]
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    return nodes


def real_stage_pods(cluster: LocalCluster, node: str, name: str) -> list[dict[str, Any]]:
    pods = kubectl_json(cluster, "pods", "-n", "fleetwright-system", "-l", f"fleetwright.io/profile={name}")
    return [p for p in pods["items"] if p["spec"].get("nodeName") == node]


def ran_in_containerd(pod: dict[str, Any]) -> list[tuple[str, int]]:
    """(container, exit code) of every init container containerd ran to completion."""
    out = []
    for status in pod["status"].get("initContainerStatuses") or []:
        terminated = status.get("state", {}).get("terminated") or {}
        if status.get("containerID", "").startswith("containerd://") and "exitCode" in terminated:
            out.append((status["name"], terminated["exitCode"]))
    return out
