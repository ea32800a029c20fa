"""A minimal valid stage request for tests that exercise what wraps a stage, not the stage Job."""

from __future__ import annotations

from typing import Any

from fleetwright.activities.payloads import StageRequest
from fleetwright.api.nodeprofile import Package
from fleetwright.planner.node.stages import Stage

PACKAGE = Package.model_validate({"name": "tuning", "version": "1.0.0", "image": "ghcr.io/example/t"})


def stage_request(stage: Stage, *, profile: str = "p", node: str = "n", **fields: Any) -> StageRequest:
    """``stage`` of the ``tuning`` package on ``node``; ``fields``: any other request field."""
    return StageRequest(
        profile=profile,
        node=node,
        profile_uid="uid",
        generation=1,
        package=PACKAGE,
        stage=stage,
        agent_image="ghcr.io/example/agent:1",
        **fields,
    )
