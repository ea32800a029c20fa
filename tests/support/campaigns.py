"""Campaign specs and member reports for the campaign planner's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fleetwright.api.campaign import CampaignSpec
from fleetwright.local import examples
from fleetwright.planner.campaign import ClusterReport

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
DONE = ClusterReport(phase="Complete", targeted=2, updated=2)
RUNNING = ClusterReport(phase="Progressing", targeted=2)


def spec(stages: list[dict[str, Any]], max_failed: int = 0) -> CampaignSpec:
    """A campaign of the example profile over the clusters ``stages`` name (each by its Secret)."""
    names = [c for s in stages for c in s["clusters"]]
    return CampaignSpec.model_validate(
        {
            "profile": examples.profile().spec.model_dump(mode="json", by_alias=True, exclude_none=True),
            "clusters": [{"name": c, "kubeconfigSecret": f"{c}-kubeconfig"} for c in names],
            "stages": stages,
            "failure": {"maxFailedNodes": max_failed},
        }
    )
