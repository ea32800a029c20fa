"""Deleting a NodeProfile end to end: the controller's finalizer holds the CR while the rollout
uninstalls every ``uninstall.enabled`` package (canary first, under the budget), the clean-up
removes what the profile wrote on its nodes (never a foreign cordon), and the CR goes; a failing
uninstall keeps the finalizer and shows ``Deleting``/``DeletionBlocked`` naming the node."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.api.keys import FINALIZER, condition_type, cordon_key, state_key, status_label_key
from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.node.state import NodePackageState, PackageRecord, format_annotation
from fleetwright.workflows.ids import rollout_workflow_id
from tests.support.engine import Sampler, cordoned_by, kubectl_json, label_nodes, simulated_kubelet, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, RunningController
from tests.support.waiting import until

pytestmark = pytest.mark.integration


def apply_removable(rollout: Rollout) -> None:
    """The rollout's profile with its package's uninstall enabled (and its policy)."""
    profile = examples.profile(rollout.name, selector={GROUP_LABEL: rollout.group}, policy=rollout.name)
    body = profile.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("status", None)
    body["metadata"] = {"name": rollout.name}
    body["spec"]["packages"][0]["uninstall"] = {"enabled": True}
    policy = examples.policy(rollout.name, **rollout.policy).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    policy.pop("status", None)
    policy["metadata"] = {"name": rollout.name}
    items = {"apiVersion": "v1", "kind": "List", "items": [policy, body]}
    rollout.cluster.kubectl("apply", "-f", "-", input=json.dumps(items))


def profile_gone(rollout: Rollout) -> bool:
    found = rollout.cluster.kubectl("get", "nodeprofile", rollout.name, "--ignore-not-found", "-o", "name")
    return found.stdout.strip() == ""


def leftovers(rollout: Rollout) -> dict[str, list[str]]:
    """Per node, what the profile still has on it."""
    out: dict[str, list[str]] = {}
    for node in kubectl_json(rollout.cluster, "nodes", "-l", f"{GROUP_LABEL}={rollout.group}")["items"]:
        meta = node["metadata"]
        found = [
            k for k in (state_key(rollout.name), cordon_key(rollout.name)) if k in meta.get("annotations", {})
        ]
        found += [k for k in (status_label_key(rollout.name),) if k in meta.get("labels", {})]
        found += [
            c["type"]
            for c in node["status"].get("conditions", [])
            if c["type"] == condition_type(rollout.name)
        ]
        out[meta["name"]] = found
    return out


def uninstalled_on(rollout: Rollout) -> set[str]:
    jobs = kubectl_json(
        rollout.cluster,
        "jobs",
        "-A",
        "-l",
        f"fleetwright.io/stage=uninstall,fleetwright.io/profile={rollout.name}",
    )["items"]
    return {
        j["metadata"]["labels"]["fleetwright.io/node"]
        for j in jobs
        if (j.get("status") or {}).get("succeeded")
    }


async def test_deleting_a_profile_uninstalls_everywhere_cleans_the_nodes_and_releases_the_finalizer(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(apply_removable, rollout)
    await until(lambda: FINALIZER in (rollout.get()["metadata"].get("finalizers") or []), 20, "the finalizer")
    await asyncio.to_thread(rollout.wait_ready)
    # Someone else cordons a node: the uninstall works under that cordon and never lifts it.
    foreign = rollout.nodes[0]
    cluster.kubectl("cordon", foreign)
    with Sampler(cordoned_by(cluster, rollout.name, f"{GROUP_LABEL}={rollout.group}")) as sampler:
        cluster.kubectl("delete", "nodeprofile", rollout.name, "--wait=false")
        deleting = await until(
            lambda: (c := rollout.condition("Deleting")) and c,
            20,
            "the Deleting condition",
            details=rollout.status,
        )
        assert deleting["status"] == "True"
        assert rollout.status()["phase"] == "Deleting"
        assert rollout.condition("Ready")["reason"] == "Deleting"  # type: ignore[index]
        await until(lambda: profile_gone(rollout), 150, "the profile to be deleted", details=rollout.status)
    assert sampler.worst <= 2, sampler.worst  # the policy's maxUnavailable held during the uninstall
    assert await asyncio.to_thread(uninstalled_on, rollout) == set(rollout.nodes)
    assert await asyncio.to_thread(leftovers, rollout) == {n: [] for n in rollout.nodes}
    nodes = {
        n["metadata"]["name"]: n
        for n in kubectl_json(cluster, "nodes", "-l", f"{GROUP_LABEL}={rollout.group}")["items"]
    }
    assert nodes[foreign]["spec"].get("unschedulable") is True, "a foreign cordon was lifted"
    assert not any(nodes[n]["spec"].get("unschedulable") for n in rollout.nodes[1:])
    reasons = await asyncio.to_thread(rollout.event_reasons)
    assert "DeletionStarted" in reasons
    cluster.kubectl("uncordon", foreign)


def record_installed(rollout: Rollout) -> None:
    """The package as a finished earlier rollout would have recorded it (the install needs no stage)."""
    profile = examples.profile(rollout.name, selector={GROUP_LABEL: rollout.group}, policy=rollout.name)
    desired = convert.package(profile.spec.packages[0])
    state = NodePackageState(
        profile=rollout.name,
        packages={"tuning": PackageRecord(version=desired.version, config=dict(desired.config))},
    )
    key, value = format_annotation(state)
    rollout.cluster.kubectl("annotate", "node", *rollout.nodes, f"{key}={value}", "--overwrite")


async def test_a_failing_uninstall_blocks_the_deletion_with_a_condition_and_keeps_the_finalizer(
    cluster: ClusterUnderTest, failing_controller: RunningController, temporal_client: Client
) -> None:
    name = unique("del")
    nodes = await asyncio.to_thread(cluster.add_nodes, 2)
    await asyncio.to_thread(label_nodes, cluster, nodes, f"{GROUP_LABEL}={name}")
    policy: dict[str, Any] = {"max_unavailable": 1, "steps": [{"name": "canary", "canary": {"count": 1}}]}
    rollout = Rollout(cluster, name, name, nodes, policy)
    try:
        with simulated_kubelet(cluster):
            await asyncio.to_thread(record_installed, rollout)
            await asyncio.to_thread(apply_removable, rollout)
            await asyncio.to_thread(rollout.wait_ready)  # already installed: nothing to run
            cluster.kubectl("delete", "nodeprofile", name, "--wait=false")
            blocked = await until(
                lambda: (c := rollout.condition("Deleting")) and c["reason"] == "DeletionBlocked" and c,
                90,
                "DeletionBlocked",
                details=rollout.status,
            )
            failed = rollout.status()["nodeIssues"][0]["node"]
            assert failed in nodes
            assert failed in blocked["message"]
            assert "uninstall" in blocked["message"]
            assert blocked["status"] == "True"
            obj = rollout.get()
            assert FINALIZER in obj["metadata"]["finalizers"]
            assert obj["metadata"].get("deletionTimestamp")
            assert rollout.status()["phase"] == "Deleting"
            reasons = await until(
                lambda: (r := rollout.event_reasons()) and "DeletionBlocked" in r and r, 20, "the Event"
            )
            assert "DeletionStarted" in reasons
            # Nothing was cleaned up: the failed node keeps its state (and the other node its package).
            assert all(
                state_key(name) in kubectl_json(cluster, "node", n)["metadata"]["annotations"] for n in nodes
            )
    finally:
        with contextlib.suppress(Exception):
            await temporal_client.get_workflow_handle(rollout_workflow_id(name)).terminate("test done")
        cluster.kubectl(
            "patch",
            "nodeprofile",
            name,
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
            check=False,
        )
        cluster.kubectl("delete", "nodeprofile,deploymentpolicy", name, "--ignore-not-found", check=False)
