"""The cordon and uncordon activities against the real control plane: a cordon is ours, and a foreign
cordon is never lifted. Each test uses its own nodes, namespace and profile name, and calls the
activities the way a worker would, through ``ActivityEnvironment``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import (
    CordonReport,
    CordonRequest,
    NodePhase,
    StatusNote,
    UncordonRequest,
)
from tests.support.nodeactivities import condition, get_json
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration


async def test_cordon_is_ours_and_a_foreign_cordon_is_never_lifted(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str]
) -> None:
    env = ActivityEnvironment()
    ours, foreign = next(spare_nodes), next(spare_nodes)
    updating = StatusNote(phase=NodePhase.IN_PROGRESS, reason="Updating", message="act-cordon: apply")
    cordon = CordonRequest(profile="act-cordon", node=ours, show_before=updating)
    report = await env.run(activities.cordon, cordon)
    assert report == CordonReport(ours=True, foreign=False)
    assert get_json(cluster, "node", ours)["spec"]["unschedulable"] is True
    assert (condition(cluster, ours, "act-cordon") or {}).get("reason") == "Updating", (
        "the first status rides on the cordon"
    )
    assert await env.run(activities.cordon, cordon) == report
    done = StatusNote(phase=NodePhase.COMPLETE, reason="Complete")
    uncordon = UncordonRequest(profile="act-cordon", node=ours, show_after=done)
    assert await env.run(activities.uncordon, uncordon) is True
    assert not get_json(cluster, "node", ours)["spec"].get("unschedulable")
    assert (condition(cluster, ours, "act-cordon") or {}).get("reason") == "Complete", (
        "the last status rides on the uncordon"
    )

    cluster.kubectl("cordon", foreign)
    report = await env.run(activities.cordon, CordonRequest(profile="act-cordon", node=foreign))
    assert report == CordonReport(ours=False, foreign=True)
    assert await env.run(activities.uncordon, UncordonRequest(profile="act-cordon", node=foreign)) is False
    assert get_json(cluster, "node", foreign)["spec"]["unschedulable"] is True
