"""Rollouts for the node tier: a ``shellscript`` profile over kwok nodes plus the real node, a
rollout whose stage marks the host root so a stage that ran twice shows, and reading what ran on
the real node (its stage pods, and which of their containers containerd ran)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fleetwright.chaos.snapshot import job_view
from fleetwright.images import spec as image_spec
from fleetwright.images.offline import Built
from fleetwright.local import examples
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from fleetwright.packagetest.hostroot import HostRoot
from tests.support.chartrbac import PACKAGES
from tests.support.engine import kubectl_json, label_nodes, unique
from tests.support.stack import GROUP_LABEL
from tests.support.waiting import wait_for


def shellscript(real_node: RealNode) -> Built:
    """The catalog's ``shellscript`` package image (1.0.0), as the real node pulls it: from the
    node's registry."""
    return real_node.image(image_spec.package_ref("shellscript", "1.0.0"))


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
    assert cluster.real_node is not None
    package: dict[str, Any] = {
        "name": "shellscript",
        "version": "1.0.0",
        "image": shellscript(cluster.real_node).repository,
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


def pod_images(pods: list[dict[str, Any]]) -> set[str]:
    """The images of every container and init container of ``pods``."""
    specs = [pod["spec"] for pod in pods]
    return {c["image"] for spec in specs for c in [*spec.get("initContainers", []), *spec["containers"]]}


def marker_of(name: str) -> str:
    """The host file ``name``'s marking scripts append to."""
    return f"/etc/fleetwright-test/{name}"


def marking_scripts(marker: str, line: str, stage_seconds: int = 0) -> dict[str, str]:
    """A shellscript package's scripts whose apply appends ``line`` to ``marker`` on the host root
    (after sleeping ``stage_seconds``), so a stage that ran twice shows twice; its check wants the
    file, and config (which a configMap makes a fresh install run) does nothing."""
    wait = f"sleep {stage_seconds} && " if stage_seconds else ""
    return {
        "apply.sh": f"{wait}mkdir -p /etc/fleetwright-test && echo {line} >> {marker}",
        "apply_check.sh": f"test -f {marker}",
        "config.sh": "exit 0",
        "config_check.sh": "exit 0",
    }


@dataclass(frozen=True)
class MarkedRollout:
    """A rollout over the real node (its canary) and two kwok nodes whose stage appends ``line`` to
    ``marker`` on the host root."""

    name: str
    nodes: list[str]
    marker: str
    line: str


def apply_marked_rollout(
    cluster: LocalCluster, real_node: RealNode, prefix: str, line: str, stage_seconds: int
) -> MarkedRollout:
    """Apply a ``MarkedRollout`` whose stage sleeps ``stage_seconds`` first (long enough to do
    something to the release while it runs on the real node)."""
    name = unique(prefix)
    nodes = group(cluster, real_node, name, 2)
    marker = marker_of(name)
    apply_rollout(cluster, name, marking_scripts(marker, line, stage_seconds), canary=real_node.options.name)
    return MarkedRollout(name, nodes, marker, line)


def wait_real_stage_running(cluster: LocalCluster, real_node: RealNode, name: str) -> None:
    """Until a stage pod of ``name``'s rollout runs on the real node."""
    node = real_node.options.name
    wait_for(
        lambda: any(p["status"].get("phase") == "Running" for p in real_stage_pods(cluster, node, name)),
        timeout=300,
        what="the real node's stage to run",
        interval=1,
    )


def assert_each_stage_ran_once(cluster: LocalCluster, host_root: HostRoot, rollout: MarkedRollout) -> None:
    """Once the rollout is complete: the stage on the real node appended one line (it ran once,
    whatever happened to the release meanwhile), and one Job ran per node, package and stage."""
    wait_complete(cluster, rollout.name)
    assert host_root.read(rollout.marker) == f"{rollout.line}\n"
    listed = kubectl_json(cluster, "jobs", "-n", PACKAGES, "-l", f"fleetwright.io/profile={rollout.name}")
    jobs = [job_view(j) for j in listed["items"]]
    keys = [job.key for job in jobs]
    assert len(keys) == len(set(keys)), sorted(keys)
    assert {job.node for job in jobs} == set(rollout.nodes)
