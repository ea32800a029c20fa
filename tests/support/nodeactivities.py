"""What the node activities' integration tests read and write on the real control plane: pods to
place on a node, a namespace's manifests, a node's condition and Events for a profile, and the
package and stage request a stage runs."""

from __future__ import annotations

import json
from typing import Any

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.keys import condition_type
from fleetwright.api.nodeprofile import Package
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.planner.node.stages import Stage
from tests.support.providers import ClusterUnderTest

FAST_POD = stage_pod_timing(0.3)
AGENT = "registry.example/fleetwright/agent:0.1.0"


def get_json(cluster: ClusterUnderTest, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def apply(cluster: ClusterUnderTest, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def pod(name: str, node: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": name}, **meta},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.example/app:1"}]},
    }


def condition(cluster: ClusterUnderTest, node: str, profile: str) -> dict[str, Any] | None:
    conditions = get_json(cluster, "node", node)["status"].get("conditions") or []
    return next((c for c in conditions if c["type"] == condition_type(profile)), None)


def node_events(cluster: ClusterUnderTest, node: str, reason: str) -> list[dict[str, Any]]:
    items = get_json(cluster, "events.v1.events.k8s.io", "-n", "default")["items"]
    return [e for e in items if e["regarding"]["name"] == node and e.get("reason") == reason]


def running(cluster: ClusterUnderTest, namespace: str, name: str) -> bool:
    return bool(get_json(cluster, "pod", name, "-n", namespace).get("status", {}).get("phase") == "Running")


def package(name: str = "tuning", **extra: Any) -> Package:
    return Package.model_validate(
        {
            "name": name,
            "version": "1.0.0",
            "image": "registry.example/fleetwright/packages/tuning",
            "stageTimeoutSeconds": 120,
            **extra,
        }
    )


def stage_request(node: str, namespace: str, pkg: Package, **extra: Any) -> StageRequest:
    return StageRequest(
        profile="act-stage",
        node=node,
        profile_uid="0b1c",
        generation=3,
        package=pkg,
        stage=extra.pop("stage", Stage.APPLY),
        agent_image=AGENT,
        namespace=namespace,
        pod_annotations=extra.pop("pod_annotations", FAST_POD),
        **extra,
    )
