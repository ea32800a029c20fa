"""Two profiles with different priorities on the same nodes, each under a budget of one node: on
every node the earlier profile (lower priority) completes before the later one starts there, and
the nodes disrupted by either profile together never exceed the shared budget. With ``sequencing:
all`` the later one starts nowhere until the earlier one is complete on all its nodes, and says
so while it waits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.api.keys import cordon_key
from fleetwright.local import examples
from fleetwright.planner.node.state import read_profile_state
from fleetwright.workflows.ids import rollout_workflow_id
from tests.support.engine import Sampler, kubectl_json
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, RunningController
from tests.support.waiting import until

pytestmark = pytest.mark.integration

BUDGET = 1


STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
]


def apply_profile(
    rollout: Rollout,
    name: str,
    priority: int,
    *,
    sequencing: str = "node",
    steps: list[dict[str, Any]] | None = None,
) -> None:
    profile = examples.profile(name, selector={GROUP_LABEL: rollout.group}, policy=name)
    body = profile.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("status", None)
    body["metadata"] = {"name": name}
    body["spec"]["priority"] = priority
    body["spec"]["sequencing"] = sequencing
    policy = examples.policy(name, max_unavailable=BUDGET, steps=steps or STEPS).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    policy.pop("status", None)
    policy["metadata"] = {"name": name}
    items = {"apiVersion": "v1", "kind": "List", "items": [policy, body]}
    rollout.cluster.kubectl("apply", "-f", "-", input=json.dumps(items))


def disrupted(cluster: ClusterUnderTest, group: str, profiles: tuple[str, ...]) -> int:
    keys = [cordon_key(p) for p in profiles]
    nodes = kubectl_json(cluster, "nodes", "-l", f"{GROUP_LABEL}={group}")["items"]
    return sum(
        1
        for n in nodes
        if n["spec"].get("unschedulable") and any(k in (n["metadata"].get("annotations") or {}) for k in keys)
    )


def stage_jobs(cluster: ClusterUnderTest, profile: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = kubectl_json(
        cluster, "jobs", "-A", "-l", f"fleetwright.io/profile={profile}"
    )["items"]
    return jobs


def rollout_started(cluster: ClusterUnderTest, name: str) -> bool:
    return bool((kubectl_json(cluster, "nodeprofile", name).get("status") or {}).get("observedGeneration"))


def ready(cluster: ClusterUnderTest, name: str) -> bool:
    obj = kubectl_json(cluster, "nodeprofile", name)
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions", [])
    )


async def test_two_profiles_run_in_priority_order_per_node_under_one_shared_budget(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    early, late = f"{rollout.name}-infra", f"{rollout.name}-tune"
    try:
        with Sampler(lambda: disrupted(cluster, rollout.group, (early, late)), interval=0.1) as sampler:
            await asyncio.to_thread(apply_profile, rollout, early, 50)
            await until(lambda: rollout_started(cluster, early), 30, f"{early} to start")
            await asyncio.to_thread(apply_profile, rollout, late, 200)
            await until(lambda: ready(cluster, early) and ready(cluster, late), 240, "both profiles Ready")
        assert sampler.samples > 0
        assert sampler.worst <= BUDGET, f"{sampler.worst} nodes disrupted at once (shared budget {BUDGET})"
        for name in (early, late):
            status = kubectl_json(cluster, "nodeprofile", name)["status"]
            assert status["progress"] == "3/3"
        # Per node: the later profile's first Job was created after the earlier one's last Job finished.
        early_jobs, late_jobs = stage_jobs(cluster, early), stage_jobs(cluster, late)
        for node in rollout.nodes:
            done = max(
                j["status"]["completionTime"]
                for j in early_jobs
                if j["metadata"]["labels"]["fleetwright.io/node"] == node
            )
            began = min(
                j["metadata"]["creationTimestamp"]
                for j in late_jobs
                if j["metadata"]["labels"]["fleetwright.io/node"] == node
            )
            assert began >= done, f"{node}: {late} started at {began} before {early} finished at {done}"
        nodes = kubectl_json(cluster, "nodes", "-l", f"{GROUP_LABEL}={rollout.group}")["items"]
        for n in nodes:
            annotations = n["metadata"]["annotations"]
            for name in (early, late):
                assert read_profile_state(annotations, name).packages["tuning"].version == "1.0.0"
            assert not n["spec"].get("unschedulable")
        # The later profile showed why it waited.
        events = kubectl_json(cluster, "events.events.k8s.io", "-n", "default")["items"]
        reasons = {e["reason"] for e in events if (e.get("regarding") or {}).get("name") == late}
        assert "RolloutComplete" in reasons
    finally:
        await delete_profiles(cluster, early, late)


async def delete_profiles(cluster: ClusterUnderTest, *names: str) -> None:
    cluster.kubectl("delete", "nodeprofile", *names, "--ignore-not-found", "--wait=false", check=False)
    await until(
        lambda: (
            not [o for o in kubectl_json(cluster, "nodeprofiles")["items"] if o["metadata"]["name"] in names]
        ),
        90,
        "the profiles deleted",
        details=lambda: [
            (o["metadata"]["name"], o.get("status"))
            for o in kubectl_json(cluster, "nodeprofiles")["items"]
            if o["metadata"]["name"] in names
        ],
    )
    cluster.kubectl("delete", "deploymentpolicy", *names, "--ignore-not-found", check=False)


def complete_nodes(cluster: ClusterUnderTest, group: str, profile: str) -> list[str]:
    nodes = kubectl_json(cluster, "nodes", "-l", f"{GROUP_LABEL}={group}")["items"]
    done = []
    for n in nodes:
        record = read_profile_state(n["metadata"].get("annotations") or {}, profile).packages.get("tuning")
        if record is not None and record.version == "1.0.0" and record.pending is None:
            done.append(n["metadata"]["name"])
    return done


def issue_messages(cluster: ClusterUnderTest, profile: str) -> list[str]:
    status = kubectl_json(cluster, "nodeprofile", profile).get("status") or {}
    return [i.get("message", "") for i in status.get("nodeIssues", [])]


async def test_sequencing_all_starts_nowhere_until_the_earlier_profile_is_complete_on_all_its_nodes(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout, temporal_client: Client
) -> None:
    """The earlier profile finishes its canary node and waits for an approval: the later one (per
    node it could start on the canary node) starts on none, shows why, and goes ahead once the
    earlier one is complete everywhere."""
    early, late = f"{rollout.name}-infra", f"{rollout.name}-tune"
    gated = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "gate", "approval": {}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
    ]
    try:
        await asyncio.to_thread(apply_profile, rollout, early, 50, steps=gated)
        await until(lambda: len(complete_nodes(cluster, rollout.group, early)) == 1, 90, f"{early}'s canary")
        await asyncio.to_thread(apply_profile, rollout, late, 200, sequencing="all")
        waiting = f"WaitingFor: earlier profile {early} on all its nodes"
        await until(
            lambda: (m := issue_messages(cluster, late)) and all(x.startswith(waiting) for x in m),
            60,
            f"{late} to show it waits for {early}",
            details=lambda: issue_messages(cluster, late),
        )
        assert stage_jobs(cluster, late) == []
        assert len(complete_nodes(cluster, rollout.group, early)) == 1
        await temporal_client.get_workflow_handle(rollout_workflow_id(early)).execute_update(
            "approve", "rollout/gate"
        )
        await until(lambda: ready(cluster, early) and ready(cluster, late), 240, "both profiles Ready")
        last_early = max(j["status"]["completionTime"] for j in stage_jobs(cluster, early))
        first_late = min(j["metadata"]["creationTimestamp"] for j in stage_jobs(cluster, late))
        assert first_late >= last_early, (
            f"{late} started at {first_late}, before {early} ended at {last_early}"
        )
        assert sorted(complete_nodes(cluster, rollout.group, late)) == sorted(rollout.nodes)
    finally:
        await delete_profiles(cluster, early, late)
