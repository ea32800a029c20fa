"""The protected-pods wait against the real control plane: the node is held, visibly, until the
protected pods go, within its bound. Each test uses its own nodes, namespace and profile name, and
calls the activities the way a worker would, through ``ActivityEnvironment``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import (
    ProtectedPodsRequest,
)
from fleetwright.api.common import LabelSelector
from fleetwright.api.keys import status_label_key
from tests.support.nodeactivities import apply, condition, get_json, node_events, pod, running
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import until, wait_for

pytestmark = pytest.mark.integration

PROTECTED = LabelSelector(match_labels={"fleetwright-test/protected": "true"})


async def test_protected_pods_hold_the_node_visibly_until_they_go(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node, profile = next(spare_nodes), "act-protected"
    apply(cluster, namespace, pod("trainer", node, labels={"fleetwright-test/protected": "true"}))
    wait_for(lambda: running(cluster, namespace, "trainer"), what="the protected pod to run")
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    request = ProtectedPodsRequest(profile=profile, node=node, selector=PROTECTED, timeout_seconds=60)
    task = asyncio.create_task(env.run(activities.wait_protected_pods, request))

    shown = await until(lambda: condition(cluster, node, profile), 30.0, "the blocked condition")
    assert shown["status"] == "False"
    assert shown["reason"] == "NonInterruptPodsRunning"
    assert f"{namespace}/trainer" in shown["message"]
    assert get_json(cluster, "node", node)["metadata"]["labels"][status_label_key(profile)] == "Blocked"
    events = await until(lambda: node_events(cluster, node, "NonInterruptPodsRunning"), 30.0, "event")
    assert f"{namespace}/trainer" in events[0]["note"]
    assert not task.done()

    cluster.kubectl("delete", "pod", "trainer", "-n", namespace, "--wait=false")
    await asyncio.wait_for(task, 30)
    assert condition(cluster, node, profile)["reason"] == "ProtectedPodsGone"  # type: ignore[index]
    assert len(node_events(cluster, node, "NonInterruptPodsRunning")) == 1
    assert any(f"{namespace}/trainer" in json.dumps(b) for b in beats)


async def test_protected_pods_wait_is_bounded_and_an_empty_selector_matches_nothing(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    apply(cluster, namespace, pod("held", node, labels={"fleetwright-test/protected": "true"}))
    wait_for(lambda: running(cluster, namespace, "held"), what="the protected pod to run")
    env = ActivityEnvironment()
    empty = ProtectedPodsRequest(profile="act-bound", node=node, selector=LabelSelector(), timeout_seconds=1)
    await env.run(activities.wait_protected_pods, empty)  # returns at once despite the running pod

    bounded = ProtectedPodsRequest(profile="act-bound", node=node, selector=PROTECTED, timeout_seconds=2)
    with pytest.raises(ApplicationError) as failure:
        await env.run(activities.wait_protected_pods, bounded)
    assert failure.value.type == "ProtectedPodsTimeout"
    assert failure.value.non_retryable
    assert f"{namespace}/held" in str(failure.value)
