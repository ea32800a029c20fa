"""The record-state and set-node-status activities against the real control plane, and a deleted node:
gone for work, done for status and undo. Each test uses its own nodes, namespace and profile name,
and calls the activities the way a worker would, through ``ActivityEnvironment``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import (
    CordonRequest,
    NodePhase,
    NodeStatusRequest,
    NodeTarget,
    RecordStateRequest,
    UncordonRequest,
)
from fleetwright.api.keys import state_key, status_label_key
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import NodePackageState, PackageRecord, parse_annotation
from tests.support.nodeactivities import condition, get_json, node_events, package, stage_request
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration


async def test_record_state_round_trips_through_the_planner_parser(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str]
) -> None:
    node = next(spare_nodes)
    state = NodePackageState(
        profile="act-state",
        packages={"tuning": PackageRecord(version="1.0.0", config={"sysctl.conf": "0123456789abcdef"})},
    )
    await ActivityEnvironment().run(
        activities.record_state, RecordStateRequest(profile="act-state", node=node, state=state)
    )
    annotations = get_json(cluster, "node", node)["metadata"]["annotations"]
    key = state_key("act-state")
    assert parse_annotation(key, annotations[key]) == state
    assert annotations[fleet_nodes.KWOK_ANNOTATION], "other annotations are untouched"


async def test_set_status_writes_label_condition_and_one_event(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str]
) -> None:
    node, profile = next(spare_nodes), "act-status-" + "x" * 60  # long: keys must be shortened
    env = ActivityEnvironment()
    failed = NodeStatusRequest(
        profile=profile,
        node=node,
        phase=NodePhase.FAILED,
        reason="StageFailed",
        message="apply-check exited 1",
    )
    await env.run(activities.set_node_status, failed)
    await env.run(activities.set_node_status, failed)  # a retried activity says it once
    node_json = get_json(cluster, "node", node)
    label = status_label_key(profile)
    assert len(label.split("/")[1]) <= 63
    assert node_json["metadata"]["labels"][label] == "Failed"
    shown = condition(cluster, node, profile)
    assert shown is not None
    assert (shown["status"], shown["reason"], shown["message"]) == (
        "False",
        "StageFailed",
        "apply-check exited 1",
    )
    [event] = node_events(cluster, node, "StageFailed")
    assert event["type"] == "Warning"
    assert "apply-check exited 1" in event["note"]
    assert event["regarding"]["uid"] == node_json["metadata"]["uid"]

    done = NodeStatusRequest(profile=profile, node=node, phase=NodePhase.COMPLETE, reason="Complete")
    await env.run(activities.set_node_status, done)
    assert get_json(cluster, "node", node)["metadata"]["labels"][label] == "Complete"
    assert condition(cluster, node, profile)["status"] == "True"  # type: ignore[index]
    kubelet_ready = [
        c for c in get_json(cluster, "node", node)["status"]["conditions"] if c["type"] == "Ready"
    ]
    assert [c["status"] for c in kubelet_ready] == ["True"], "the kubelet's conditions stay"


async def test_a_deleted_node_is_gone_for_work_and_done_for_status_and_undo(
    activities: NodeActivities, namespace: str
) -> None:
    # The real 404s: work on a missing Node says NodeGone (the node workflow ends: it left the
    # fleet); showing status, uncordoning and releasing the taint on it are done already.
    env = ActivityEnvironment()
    target = NodeTarget(profile="act-gone", node="no-such-node")
    await env.run(
        activities.set_node_status,
        NodeStatusRequest(profile="act-gone", node="no-such-node", phase=NodePhase.FAILED, reason="X"),
    )
    uncordon = UncordonRequest(profile="act-gone", node="no-such-node", show_after=None)
    assert await env.run(activities.uncordon, uncordon) is False
    assert (await env.run(activities.release_runtime_taint, target)).removed is False
    state = NodePackageState(profile="act-gone")
    record = RecordStateRequest(profile="act-gone", node="no-such-node", state=state)
    # A reboot stage reads the node's boot id before it creates its Job.
    reboot = stage_request(
        "no-such-node", namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT
    ).model_copy(update={"profile": "act-gone", "reboot_timeout_seconds": 60})
    work: list[Callable[[], Awaitable[object]]] = [
        lambda: env.run(activities.cordon, CordonRequest(profile="act-gone", node="no-such-node")),
        lambda: env.run(activities.run_stage, reboot),
        lambda: env.run(activities.record_state, record),
    ]
    for call in work:
        with pytest.raises(ApplicationError) as gone:
            await call()
        assert gone.value.type == "NodeGone"
        assert gone.value.non_retryable
