"""A DeploymentPolicy with compartments, end to end on the time-skipping server: each compartment
takes the nodes its selector matches and paces them by its own steps (canary by selector, a soak
with a health gate, an approval, linear or exponential batches with pauses) under its own cap,
while nodes no compartment matches follow the policy's own steps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fleetwright.api.common import API_VERSION
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.local import examples
from fleetwright.local.nodes import node_name
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.payloads import RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.rollouts import SETTINGS, start, unique
from tests.support.waiting import until, until_progress
from tests.workflow.fakefleet import FakeFleet

pytestmark = pytest.mark.workflow

PRODUCT = "nvidia.com/gpu.product"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
RETIRED = "example.com/retired"
CANARY = node_name(5)
# Nodes 0-7 are one rack of H100s, 8-11 the next rack's A100s (local.nodes); one A100 is
# labelled retired, so the a100 compartment's DoesNotExist leaves it to the policy's own steps.
H100_NODES = {node_name(i) for i in range(8)}
A100_NODES = {node_name(i) for i in range(8, 11)}
RETIRED_NODE = node_name(11)


def compartments_policy() -> DeploymentPolicy:
    h100_steps: list[dict[str, Any]] = [
        {"name": "first", "canary": {"selector": {"matchLabels": {"kubernetes.io/hostname": CANARY}}}},
        {
            "name": "watch",
            "soak": {
                "durationSeconds": 3600,
                "healthGate": {
                    # Readiness through nodeConditions instead. The fake nodes report Ready,
                    # NetworkUnavailable=False and no GPU condition.
                    "nodeReady": False,
                    "nodeConditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "NetworkUnavailable", "status": "False"},
                        {"type": "example.com/GPUDiagnostics", "status": "Unknown"},
                    ],
                },
            },
        },
        {"name": "sign-off", "approval": {"timeoutSeconds": 86400}},
        {
            "name": "rest",
            "batches": {
                "strategy": "linear",
                "initial": 1,
                "delta": 1,
                "maxBatchSize": 2,
                "batchThreshold": 100,
                "safetyLimit": 50,
                "soakSeconds": 600,
                "resetBatchStateOnCompletion": True,
            },
        },
    ]
    spec = {
        "maxUnavailable": 4,
        "steps": [{"name": "rest", "batches": {"strategy": "fixed", "initial": 3}}],
        "failure": {"maxFailedNodes": 0},
        "compartments": [
            {
                "name": "h100",
                "selector": {
                    "matchExpressions": [
                        {"key": PRODUCT, "operator": "In", "values": [H100]},
                        {"key": "nvidia.com/gpu.present", "operator": "Exists"},
                    ]
                },
                "maxUnavailable": 2,
                "steps": h100_steps,
                "failure": {"maxFailedNodes": 1, "failureThreshold": 2, "action": "halt"},
            },
            {
                "name": "a100",
                "selector": {
                    "matchLabels": {PRODUCT: A100},
                    "matchExpressions": [
                        {"key": PRODUCT, "operator": "NotIn", "values": ["NVIDIA-GB200"]},
                        {"key": RETIRED, "operator": "DoesNotExist"},
                    ],
                },
                "maxUnavailable": 1,
                "steps": [
                    {"name": "all", "batches": {"strategy": "exponential", "initial": 1, "growthFactor": 2}}
                ],
            },
        ],
    }
    return DeploymentPolicy.model_validate(
        {"apiVersion": API_VERSION, "kind": "DeploymentPolicy", "metadata": {"name": "zones"}, "spec": spec}
    )


def started(fleet: FakeFleet, nodes: set[str]) -> list[str]:
    """The nodes of ``nodes`` that started a stage, in the order they first did."""
    return list(dict.fromkeys(n for n, _ in fleet.started_stages if n in nodes))


def most_cordoned(fleet: FakeFleet, nodes: set[str]) -> int:
    return max((len(cordoned & nodes) for cordoned in fleet.cordoned_sets), default=0)


async def test_each_compartment_paces_its_own_nodes_by_its_steps_and_cap(
    skipping_client: Client, time_skipping_env: WorkflowEnvironment
) -> None:
    client = skipping_client
    fleet = FakeFleet(size=12)
    for node in fleet.nodes.values():
        node["status"]["conditions"].append({"type": "NetworkUnavailable", "status": "False"})
    fleet.nodes[RETIRED_NODE]["metadata"]["labels"][RETIRED] = "true"
    rollout = RolloutInput(
        profile=examples.profile(name=unique()), policy=compartments_policy(), settings=SETTINGS
    )
    handle, queue = await start(client, fleet, rollout)

    async def h100_started(count: int) -> None:
        await until(
            lambda: len(started(fleet, H100_NODES)) == count,
            30.0,
            f"{count} h100 nodes started",
            interval=0.05,
            blocking=False,
        )

    async with build_worker(client, fleet.activities(), task_queue=queue):
        # The canary is the node the h100 selector names; a100 and the retired node go meanwhile.
        await h100_started(1)
        assert started(fleet, H100_NODES) == [CANARY]
        await until(
            lambda: fleet.statuses.get(CANARY) == "Complete",
            30.0,
            "the canary",
            interval=0.05,
            blocking=False,
        )
        soaking = await until_progress(handle, lambda p: "h100: soak watch" in p.message, "the soak")
        assert soaking.phase != "Halted", soaking  # every updated node passes the health gate
        await time_skipping_env.sleep(timedelta(hours=1))
        await until_progress(handle, lambda p: "awaiting approval h100/sign-off" in p.message, "the approval")
        assert started(fleet, H100_NODES) == [CANARY]
        await handle.execute_update(RolloutWorkflow.approve, "h100/sign-off")
        # Linear batches 1, 2, 2, 2 (maxBatchSize caps the growth), ten minutes apart.
        for total in (2, 4, 6, 8):
            await h100_started(total)
            await until(
                lambda: all(fleet.statuses.get(n) == "Complete" for n in started(fleet, H100_NODES)),
                30.0,
                f"h100 batch up to {total}",
                interval=0.05,
                blocking=False,
            )
            if total < 8:
                await until_progress(handle, lambda p: "h100: pause between batches" in p.message, "a pause")
                assert len(started(fleet, H100_NODES)) == total
                await time_skipping_env.sleep(timedelta(minutes=10))
        done = await until_progress(handle, lambda p: p.phase == "Complete", "Complete")
        await handle.terminate("test done")
    assert done.updated == 12
    assert set(started(fleet, A100_NODES)) == A100_NODES
    assert RETIRED_NODE in fleet.started_nodes()
    assert most_cordoned(fleet, H100_NODES) <= 2
    assert most_cordoned(fleet, A100_NODES) == 1
    assert fleet.max_cordoned <= 4
