"""What one rollout rolls out: a profile's desired packages, the policy pacing it and the duration
estimates, bundled as one frozen value that travels inside the rollout state.

``target`` is a digest of the desired packages only: a policy edit changes how the rollout proceeds,
not what it converges to, so only a package change makes a new target. A rollback's spec
(``rollback`` set, ``planner.rollout.rollback``) has its own target: returning is another destination.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from functools import cached_property

from fleetwright.planner.base import Frozen
from fleetwright.planner.node.durations import StageDurations
from fleetwright.planner.node.packages import DesiredPackage, PackageGraph
from fleetwright.planner.policy.model import RolloutPolicy


class RollbackOf(Frozen):
    """The rollout a rollback returns: nodes whose records say this rollout changed them."""

    target: str
    since: datetime
    reason: str
    """Why the failure rule fired (the rolled-back rollout's halt reason)."""


class RolloutSpec(Frozen):
    profile: str
    packages: tuple[DesiredPackage, ...]
    policy: RolloutPolicy = RolloutPolicy()
    durations: StageDurations = StageDurations()
    previous: tuple[DesiredPackage, ...] | None = None
    """The packages of the spec this one replaced (None: none is known). A rollback returns a
    package to one of these definitions (its image and config) or, where the node had none, uninstalls it."""
    rollback: RollbackOf | None = None
    """Set on a rollback's spec: ``packages`` are the rolled-back spec's, ``previous`` what to
    return to."""

    @cached_property
    def graph(self) -> PackageGraph:
        return PackageGraph(self.packages)

    @cached_property
    def target(self) -> str:
        packages: list[object] = [p.model_dump(mode="json") for p in self.packages]
        if self.rollback is not None:
            packages.append({"rollback": self.rollback.model_dump(mode="json", exclude={"reason"})})
        payload = json.dumps(packages, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
