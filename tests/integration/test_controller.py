"""The controller end to end: `kubectl apply` of NodeProfiles and DeploymentPolicies drives real
rollouts (in-process worker with the real activities, kwok nodes, the Temporal dev server), and
the CR status, conditions and Events mirror them; pausing, editing and restarting the controller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.api.keys import claim_key, condition_type, cordon_key, status_label_key
from fleetwright.workflows.ids import rollout_workflow_id
from tests.support.engine import kubectl_json, label_nodes
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, RunningController, first_cordon_latency
from tests.support.waiting import until

pytestmark = pytest.mark.integration


async def test_apply_starts_the_rollout_and_kubectl_wait_ready_returns_when_done(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    latency = await asyncio.to_thread(first_cordon_latency, cluster, rollout)
    print(f"apply -> first cordon: {latency:.2f}s")
    assert latency < 5, latency
    await asyncio.to_thread(rollout.wait_ready)
    status = await asyncio.to_thread(rollout.status)
    assert status["phase"] == "Complete"
    assert status["observedGeneration"] == 1
    assert status["progress"] == "3/3"
    assert status["nodesComplete"] == 3
    assert status["nodesFailed"] == 0
    assert status["workflowId"] == f"nodeprofile/{rollout.name}"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["reason"] == "RolloutComplete"
    assert conditions["Progressing"]["status"] == "False"
    assert {conditions[t]["status"] for t in ("Paused", "Blocked", "Degraded")} == {"False"}
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.0.0"}
    reasons = await until(
        lambda: (r := rollout.event_reasons()) and "RolloutComplete" in r and r, 10, "events"
    )
    assert "RolloutStarted" in reasons


async def test_the_pause_annotation_pauses_and_clearing_it_resumes(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(rollout.apply)
    # The canary finished and the soak holds: pause now, so nothing more may start.
    await until(lambda: rollout.status().get("nodesComplete") == 1, 60, "the canary to complete")
    cluster.kubectl("annotate", "nodeprofile", rollout.name, "fleetwright.io/paused=true")
    paused = await until(
        lambda: (c := rollout.condition("Paused")) and c["status"] == "True" and c, 15, "Paused=True"
    )
    assert paused["reason"] == "PausedByUser"
    # On a loaded machine the 3 s soak may end before the pause arrives, so the rule checked is
    # the product's: once the rollout reports Paused, no further node starts.
    at_pause = started(await asyncio.to_thread(rollout.status))
    await asyncio.sleep(5)  # longer than the soak: a running rollout would have started the rest
    status = await asyncio.to_thread(rollout.status)
    assert status["phase"] == "Paused"
    assert started(status) == at_pause < len(rollout.nodes)
    await until(lambda: rollout.cordoned() == [], 60, "nodes already running to finish")
    cluster.kubectl("annotate", "nodeprofile", rollout.name, "fleetwright.io/paused-")
    await asyncio.to_thread(rollout.wait_ready)
    assert rollout.condition("Paused")["status"] == "False"  # type: ignore[index]
    reasons = await until(
        lambda: (r := rollout.event_reasons()) and "RolloutComplete" in r and r, 10, "events"
    )
    assert {"RolloutPaused", "RolloutResumed"} <= set(reasons)


async def test_editing_the_profile_mid_rollout_rolls_out_the_new_generation(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    await asyncio.to_thread(rollout.apply, version="1.1.0")
    assert rollout.get()["metadata"]["generation"] == 2
    await until(lambda: rollout.status().get("observedGeneration") == 2, 20, "observedGeneration 2")
    await asyncio.to_thread(rollout.wait_ready)
    status = await asyncio.to_thread(rollout.status)
    assert status["observedGeneration"] == 2
    assert status["progress"] == "3/3"
    assert rollout.condition("Ready")["observedGeneration"] == 2  # type: ignore[index]
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.1.0"}


async def test_a_controller_restart_mid_rollout_only_delays_status(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout, temporal_client: Client
) -> None:
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    handle = temporal_client.get_workflow_handle(rollout_workflow_id(rollout.name))
    run_id = (await handle.describe()).run_id
    await controller.stop()
    frozen = await asyncio.to_thread(rollout.status)
    # The rollout goes on without the controller (the canary completes); only the status stands still.
    await until(lambda: "1.0.0" in rollout.recorded_versions(), 40, "the canary to complete")
    assert await asyncio.to_thread(rollout.status) == frozen
    assert frozen.get("nodesComplete", 0) == 0
    controller.start()
    await asyncio.to_thread(rollout.wait_ready)
    assert (await handle.describe()).run_id == run_id, "the restart started a second rollout"
    assert (await asyncio.to_thread(rollout.status))["progress"] == "3/3"


async def test_a_node_joining_mid_rollout_is_signalled_and_updated(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned")
    (joined,) = await asyncio.to_thread(cluster.add_nodes, 1)
    await asyncio.to_thread(label_nodes, cluster, [joined], f"{GROUP_LABEL}={rollout.group}")
    await until(
        lambda: rollout.status().get("nodesTargeted") == 4,
        20,
        "the new node to be targeted",
        details=rollout.status,
    )
    await asyncio.to_thread(rollout.wait_ready)
    assert (await asyncio.to_thread(rollout.status))["progress"] == "4/4"
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.0.0"}


@pytest.mark.parametrize("rollout", [63], indirect=True)  # the longest name the CRD allows
async def test_a_profile_with_the_longest_name_rolls_out_to_completion(
    cluster: ClusterUnderTest, controller: RunningController, rollout: Rollout
) -> None:
    """Every key built from the profile's name (start claim, cordon marker, package state, status
    label, node condition) is one the API server accepts, so the rollout runs as any other."""
    assert len(rollout.name) == 63
    await asyncio.to_thread(rollout.apply)
    await until(rollout.cordoned, 30, "the canary to be cordoned under the profile's cordon key")
    await asyncio.to_thread(rollout.wait_ready)
    status = await asyncio.to_thread(rollout.status)
    assert (status["phase"], status["progress"], status["nodesFailed"]) == ("Complete", "3/3", 0)
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.0.0"}
    for name in rollout.nodes:
        node = kubectl_json(cluster, "node", name)
        assert node["metadata"]["labels"][status_label_key(rollout.name)] == "Complete"
        shown = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert shown[condition_type(rollout.name)] == "True"
        left = node["metadata"].get("annotations") or {}
        assert cordon_key(rollout.name) not in left
        assert claim_key(rollout.name) not in left
        assert not node["spec"].get("unschedulable")


def started(status: dict[str, Any]) -> int:
    """Nodes the rollout has started (finished, running or failed), from the mirrored status."""
    return sum(int(status.get(key, 0)) for key in ("nodesComplete", "nodesInProgress", "nodesFailed"))
