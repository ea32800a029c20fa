"""``demo --campaign`` gives an approval only when the campaign waits at that stage's gate with
every cluster of the stage complete, and once."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.cli.democampaign import Approvals

pytestmark = pytest.mark.unit


def status(phase: str, stage: str, **clusters: str) -> dict[str, Any]:
    return {
        "phase": phase,
        "stage": stage,
        "clusters": [{"name": name.replace("_", "-"), "phase": p} for name, p in clusters.items()],
    }


def test_the_stage_is_approved_once_the_campaign_waits_with_its_clusters_complete() -> None:
    approvals = Approvals("c", {"canary": ["cluster-1"]})
    waiting = status("Waiting", "canary", cluster_1="Complete", cluster_2="Pending")
    assert approvals.due(waiting) == "canary"
    approvals.given.append("canary")
    assert approvals.due(waiting) is None


@pytest.mark.parametrize(
    "shown",
    [
        status("Progressing", "canary", cluster_1="Progressing"),
        status("Waiting", "canary", cluster_1="Progressing"),  # a soak before the stage completed
        status("Waiting", "rest", cluster_1="Complete"),  # a stage without approval
        status("Halted", "canary", cluster_1="Complete"),
        {},
    ],
)
def test_nothing_is_approved_otherwise(shown: dict[str, Any]) -> None:
    assert Approvals("c", {"canary": ["cluster-1"]}).due(shown) is None
