"""Regression tests for bugs the chaos suite found (fleetwright/chaos, docs/chaos.md).

Seed 4242, iteration 0 (invariant "every blocked wait is visible as a condition within 30 s"): a
stage whose package image never pulls was a silent wait until ``image_pull_timeout_seconds``
(default 300 s) failed it. The stage runner (activities/stage.py) heartbeated the ImagePullBackOff
but never published the node as Blocked, unlike the drain (DrainBlocked) and protected-pods waits,
so neither the node condition ``fleetwright.io/<profile>`` nor the NodeProfile showed it. Now the
runner publishes it as soon as it sees it (reason ImagePullWaiting).

Deterministic: runs the real run_stage activity against the real control plane with a pod that
never pulls and a bound well beyond 30 s."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import StageRequest
from fleetwright.api.keys import condition_type
from fleetwright.api.nodeprofile import Package
from fleetwright.kube import client as kube_client
from fleetwright.planner.node.stages import Stage
from tests.support.engine import unique
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import until

pytestmark = pytest.mark.integration

VISIBLE_WITHIN = 30.0


def node_condition(cluster: ClusterUnderTest, node: str, profile: str) -> dict[str, Any] | None:
    conditions = json.loads(cluster.kubectl("get", "node", node, "-o", "json").stdout)["status"]["conditions"]
    return next((c for c in conditions if c["type"] == condition_type(profile)), None)


async def test_an_image_that_never_pulls_is_visible_as_blocked_within_30_seconds(
    cluster: ClusterUnderTest,
) -> None:
    [node] = await asyncio.to_thread(cluster.add_nodes, 1)
    profile = unique("pull")
    request = StageRequest(
        profile=profile,
        node=node,
        profile_uid="0b1c",
        generation=1,
        package=Package.model_validate(
            {
                "name": "tuning",
                "version": "1.0.0",
                "image": "registry.example/tuning",
                "stageTimeoutSeconds": 600,
            }
        ),
        stage=Stage.APPLY,
        agent_image="registry.example/fleetwright/agent:0.1.0",
        namespace="fleetwright-system",
        pod_labels={"sim.fleetwright.io/outcome": "image-pull-backoff"},
        image_pull_timeout_seconds=300,
    )
    activities = NodeActivities(kube_client.from_kubeconfig(cluster.kubeconfig))
    stage = asyncio.create_task(ActivityEnvironment().run(activities.run_stage, request))
    seen: list[dict[str, Any] | None] = [None]

    async def held() -> dict[str, Any] | None:
        assert not stage.done(), "the stage ended before the pull wait could be observed"
        seen[-1] = await asyncio.to_thread(node_condition, cluster, node, profile)
        return seen[-1] if seen[-1] is not None and seen[-1]["status"] == "False" else None

    try:
        what = "the node's condition to show the ImagePullBackOff wait"
        shown = await until(held, VISIBLE_WITHIN, what, interval=1.0, details=lambda: seen[-1])
        assert not stage.done(), "the stage ended before the pull wait could be observed"
        assert shown["status"] == "False", shown
        assert shown["reason"] == "ImagePullWaiting", shown
    finally:
        stage.cancel()
        with contextlib.suppress(BaseException):
            await stage
