"""The runtime-required taint end to end: with ``runtimeRequired`` and ``autoTaintNewNodes`` a node
that joins mid-rollout (already carrying the profile's labels) is tainted at once by the
controller, gets its packages, and the taint comes off when the profile is complete on it."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from fleetwright.api.keys import RUNTIME_REQUIRED_TAINT
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner.node.state import read_profile_state
from tests.support.engine import Sampler, kubectl_json
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, RunningController
from tests.support.waiting import until

pytestmark = pytest.mark.integration


def apply_runtime_required(rollout: Rollout) -> None:
    profile = examples.profile(rollout.name, selector={GROUP_LABEL: rollout.group}, policy=rollout.name)
    body = profile.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("status", None)
    body["metadata"] = {"name": rollout.name}
    body["spec"]["runtimeRequired"] = True
    body["spec"]["autoTaintNewNodes"] = True
    policy = examples.policy(rollout.name, **rollout.policy).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    policy.pop("status", None)
    policy["metadata"] = {"name": rollout.name}
    items = {"apiVersion": "v1", "kind": "List", "items": [policy, body]}
    rollout.cluster.kubectl("apply", "-f", "-", input=json.dumps(items))


def join_node(cluster: ClusterUnderTest, group: str) -> str:
    """A node that registers already labelled for the group (as a cloud node group's would). A high
    index keeps its name clear of ``add_nodes``'s sequence."""
    manifest = fleet_nodes.node_manifest(random.randint(5000, 9999), extra_labels={GROUP_LABEL: group})
    cluster.kubectl("create", "-f", "-", input=json.dumps(manifest))
    return str(manifest["metadata"]["name"])


def tainted(cluster: ClusterUnderTest, node: str) -> bool:
    taints = kubectl_json(cluster, "node", node)["spec"].get("taints") or []
    return any(t["key"] == RUNTIME_REQUIRED_TAINT and t["effect"] == "NoSchedule" for t in taints)


def node_event_reasons(cluster: ClusterUnderTest, node: str) -> list[str]:
    events = kubectl_json(cluster, "events.events.k8s.io", "-A")["items"]
    return [
        e["reason"]
        for e in events
        if (e.get("regarding") or {}).get("kind") == "Node" and e["regarding"].get("name") == node
    ]


async def test_a_node_joining_mid_rollout_is_tainted_updated_and_untainted(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(apply_runtime_required, rollout)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    joined = await asyncio.to_thread(join_node, cluster, rollout.group)
    rollout.nodes.append(joined)
    try:
        with Sampler(lambda: int(tainted(cluster, joined)), interval=0.1) as sampler:
            await until(
                lambda: "RuntimeTaintAdded" in node_event_reasons(cluster, joined), 20, "the taint Event"
            )
            await until(lambda: rollout.status().get("nodesTargeted") == 4, 20, "the node to be targeted")
            await asyncio.to_thread(rollout.wait_ready, 120)
            await until(lambda: not tainted(cluster, joined), 20, "the taint to come off")
        assert sampler.worst == 1, "the joined node was never seen tainted"
        status = await asyncio.to_thread(rollout.status)
        assert status["progress"] == "4/4"
        assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
        node = kubectl_json(cluster, "node", joined)
        state = read_profile_state(node["metadata"]["annotations"], rollout.name)
        assert state.packages["tuning"].version == "1.0.0"
        # The nodes that were there before the profile were never tainted.
        assert not any(tainted(cluster, n) for n in rollout.nodes)
    finally:
        # The profile goes first (its clean-up covers the joined node), then the node.
        await asyncio.to_thread(rollout.delete)
        cluster.kubectl("delete", "node", joined, "--ignore-not-found", "--wait=false", check=False)
