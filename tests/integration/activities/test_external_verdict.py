"""The node gate's external-validator activity (``HealthActivities.wait_external``) against the
real API server, called as a worker calls it: a node condition another client sets after the
node's update began is the verdict (its status passes or fails the gate); one that turned before
the update is no verdict, so the validator times out; an annotation verdict is read and removed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.health import HealthActivities
from fleetwright.activities.payloads import ExternalVerdict, ExternalWaitRequest
from fleetwright.api.health import ExternalValidator
from fleetwright.kube import client as kube_client
from fleetwright.prometheus import PrometheusAccess
from tests.support.engine import kubectl_json
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import until

pytestmark = pytest.mark.integration

CONDITION = "BurnInPassed"
ANNOTATION = "burnin.example.com/verdict"


@pytest.fixture(scope="module")
def health(cluster: ClusterUnderTest) -> HealthActivities:
    return HealthActivities(kube_client.from_kubeconfig(cluster.kubeconfig), PrometheusAccess())


def validator(**fields: Any) -> ExternalValidator:
    return ExternalValidator.model_validate({"name": "burn-in", "timeoutSeconds": 10, **fields})


def set_condition(cluster: ClusterUnderTest, node: str, status: str) -> None:
    """What a burn-in controller does: write the node condition through the status subresource,
    with its transition time (the API server sets none of a Node's condition times)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": CONDITION, "status": status, "reason": "BurnIn", "message": "dcgm diag -r 3"}
    condition |= {"lastTransitionTime": now, "lastHeartbeatTime": now}
    patch = {"status": {"conditions": [condition]}}
    cluster.kubectl(
        "patch", "node", node, "--subresource=status", "--type=strategic", "-p", json.dumps(patch)
    )


def turned(cluster: ClusterUnderTest, node: str) -> str:
    """The condition's lastTransitionTime as the API server shows it ("" while it has none)."""
    conditions = kubectl_json(cluster, "node", node)["status"].get("conditions") or []
    return next((c.get("lastTransitionTime", "") for c in conditions if c["type"] == CONDITION), "")


def waiting(health: HealthActivities, request: ExternalWaitRequest) -> asyncio.Task[ExternalVerdict]:
    return asyncio.create_task(ActivityEnvironment().run(health.wait_external, request))


@pytest.mark.parametrize(("status", "passed"), [("True", True), ("False", False)])
async def test_a_condition_set_by_another_client_during_the_wait_is_the_verdict(
    cluster: ClusterUnderTest, spare_nodes: Iterator[str], health: HealthActivities, status: str, passed: bool
) -> None:
    node = next(spare_nodes)
    request = ExternalWaitRequest(
        profile="ext", node=node, validator=validator(conditionType=CONDITION), since=datetime.now(UTC)
    )
    task = waiting(health, request)
    await asyncio.to_thread(set_condition, cluster, node, status)
    verdict = await asyncio.wait_for(task, 30)
    assert verdict.passed is passed, verdict
    assert verdict.message.startswith(f"condition {CONDITION}={status} (dcgm diag -r 3)"), verdict


async def test_a_condition_that_predates_the_update_is_no_verdict(
    cluster: ClusterUnderTest, spare_nodes: Iterator[str], health: HealthActivities
) -> None:
    node = next(spare_nodes)
    await asyncio.to_thread(set_condition, cluster, node, "True")
    shown = await until(lambda: turned(cluster, node), 30, f"{CONDITION} on {node}")
    began = datetime.fromisoformat(shown.replace("Z", "+00:00")) + timedelta(seconds=1)
    request = ExternalWaitRequest(
        profile="ext", node=node, validator=validator(conditionType=CONDITION), since=began
    )
    verdict = await asyncio.wait_for(waiting(health, request), 60)
    assert not verdict.passed, verdict
    assert verdict.message.startswith("no verdict within 10s"), verdict


async def test_an_annotation_verdict_is_read_and_removed(
    cluster: ClusterUnderTest, spare_nodes: Iterator[str], health: HealthActivities
) -> None:
    node = next(spare_nodes)
    request = ExternalWaitRequest(
        profile="ext", node=node, validator=validator(annotation=ANNOTATION), since=datetime.now(UTC)
    )
    task = waiting(health, request)
    await asyncio.to_thread(cluster.kubectl, "annotate", "node", node, f"{ANNOTATION}=passed")
    verdict = await asyncio.wait_for(task, 30)
    assert verdict.passed, verdict
    annotations = kubectl_json(cluster, "node", node)["metadata"].get("annotations") or {}
    assert ANNOTATION not in annotations
