"""The thin watcher that feeds the invariant checks: on a background thread it lists one rollout's
nodes, stage Jobs, stage pods and NodeProfile every ``interval`` seconds and records each reading
as a ``Snapshot``. It must not judge anything (``invariants`` does) and never writes to the cluster.

A reading that fails (the apiserver is being killed) is counted and skipped; the next one follows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from fleetwright.api.keys import PROFILE_LABEL
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.chaos.snapshot import Snapshot, snapshot
from fleetwright.errors import NotFoundError
from fleetwright.kube import inventory
from fleetwright.kube.client import ApiClient
from fleetwright.local.ticker import Ticker
from fleetwright.stagejob.render import PACKAGE_NAMESPACE


@dataclass
class Watcher:
    api: ApiClient
    profile: str
    node_selector: str
    """Label selector of the rollout's nodes."""
    interval: float = 0.5
    namespace: str = PACKAGE_NAMESPACE
    timeline: list[Snapshot] = field(default_factory=list)
    failed_reads: int = 0
    _started: float = field(default_factory=time.monotonic)
    _ticker: Ticker | None = None

    def now(self) -> float:
        """Seconds since the watcher was made: the clock snapshots and fault windows share."""
        return time.monotonic() - self._started

    def read(self) -> Snapshot:
        """One snapshot now (raises when the cluster cannot be read)."""
        at = self.now()
        selector = f"{PROFILE_LABEL}={self.profile}"
        nodes = inventory.list_items(self.api, "nodes", label_selector=self.node_selector)
        jobs = inventory.list_items(self.api, "jobs", namespace=self.namespace, label_selector=selector)
        pods = inventory.list_items(self.api, "pods", namespace=self.namespace, label_selector=selector)
        profile: dict[str, Any] | None
        try:
            profile = inventory.get_custom(self.api, PROFILE_PLURAL, self.profile)
        except NotFoundError:
            profile = None
        return snapshot(at, nodes, jobs, pods, profile)

    def tick(self) -> None:
        try:
            self.timeline.append(self.read())
        except Exception:  # an apiserver being killed is expected here; the next tick reads again
            self.failed_reads += 1

    def final(self, attempts: int = 60) -> Snapshot:
        """A last snapshot, read until it succeeds (the apiserver may be restarting)."""
        for _ in range(attempts):
            try:
                last = self.read()
            except Exception:
                self.failed_reads += 1
                time.sleep(1.0)
                continue
            self.timeline.append(last)
            return last
        raise RuntimeError(f"the cluster could not be read for {attempts}s")

    def __enter__(self) -> Watcher:
        self._ticker = Ticker(self.tick, self.interval, name=f"chaos-watch-{self.profile}").__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._ticker is not None:
            self._ticker.__exit__(exc_type, exc, tb)
