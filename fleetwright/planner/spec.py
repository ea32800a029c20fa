"""What one rollout rolls out: a profile's desired packages, the policy pacing it and the duration
estimates, bundled as one frozen value that travels inside the rollout state.

``target`` is a digest of the desired packages only: a policy edit changes how the rollout proceeds,
not what it converges to, so only a package change makes a new target.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property

from fleetwright.planner.base import Frozen
from fleetwright.planner.durations import StageDurations
from fleetwright.planner.packages import DesiredPackage, PackageGraph
from fleetwright.planner.policy import RolloutPolicy


class RolloutSpec(Frozen):
    profile: str
    packages: tuple[DesiredPackage, ...]
    policy: RolloutPolicy = RolloutPolicy()
    durations: StageDurations = StageDurations()

    @cached_property
    def graph(self) -> PackageGraph:
        return PackageGraph(self.packages)

    @cached_property
    def target(self) -> str:
        payload = json.dumps([p.model_dump(mode="json") for p in self.packages], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
