"""The package state one node workflow advances as its stages pass: what it records on the Node
after each stage (``NodePackageState``), so a restarted run resumes after the last passed stage
instead of running it again.

A change's first record also keeps what the package was before (``before``, naming the rollout),
and a rollback's last record drops it: that is how a rollback finds what its rollout changed.

Pure bookkeeping over the planner's records: it starts from the state the decision read, and
never talks to the API server (the stage's activity writes what it returns).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.node.stages import Action, Stage
from fleetwright.planner.node.state import Before, NodePackageState, PackageRecord, PendingChange
from fleetwright.planner.node.work import NodeWork, PackageWork

MAX_FAILURE = 500


class PackageLedger:
    """One node's records of one profile as its work advances."""

    def __init__(
        self,
        profile: str,
        records: Mapping[str, PackageRecord],
        work: NodeWork,
        desired: Iterable[DesiredPackage],
        rollout: tuple[str, datetime] | None = None,
    ) -> None:
        """``rollout``: the target and since of the rollout this work is for, recorded in the
        ``before`` of each package it starts to change (None: nothing is recorded)."""
        self.profile = profile
        self.records: dict[str, PackageRecord] = dict(records)
        self.works = {w.package: w for w in work.packages}
        self.returning = work.returns_to is not None
        self.desired = {p.name: p for p in (work.returns_to if work.returns_to is not None else desired)}
        self.rollout = rollout

    def state(self) -> NodePackageState:
        return NodePackageState(profile=self.profile, packages=dict(sorted(self.records.items())))

    def stage_done(self, package: str, stage: Stage) -> None:
        pending = self._pending(package)
        done = (*pending.done, stage) if stage not in pending.done else pending.done
        pending = pending.model_copy(update={"done": done, "failed": None})
        record = self.records.get(package, PackageRecord())
        if pending.remaining():
            self.records[package] = self._changing(record).model_copy(update={"pending": pending})
        else:
            before = None if self.returning else self._changing(record).before
            self.records[package] = _completed(self.works[package], pending).model_copy(
                update={"before": before}
            )

    def states_after(self, steps: Iterable[tuple[Iterable[str], Stage]]) -> list[NodePackageState]:
        """The state once each of ``steps`` (packages, stage) is done, each after those before it,
        without recording that they are."""
        kept = dict(self.records)
        states = []
        for packages, stage in steps:
            for package in packages:
                self.stage_done(package, stage)
            states.append(self.state())
        self.records = kept
        return states

    def failed(self, package: str, message: str) -> None:
        pending = self._pending(package).model_copy(update={"failed": message[:MAX_FAILURE]})
        record = self.records.get(package, PackageRecord())
        self.records[package] = self._changing(record).model_copy(update={"pending": pending})

    def _changing(self, record: PackageRecord) -> PackageRecord:
        """``record`` naming this rollout in its ``before``: kept if it already does (a resumed
        change) or this work returns it (a rollback keeps what it returns to until it is back)."""
        if self.returning or self.rollout is None:
            return record
        target, since = self.rollout
        if record.before is not None and record.before.by(target, since):
            return record
        before = Before(target=target, since=since, version=record.version, config=dict(record.config))
        return record.model_copy(update={"before": before})

    def _pending(self, package: str) -> PendingChange:
        work = self.works[package]
        record = self.records.get(package, PackageRecord())
        want_version = work.to_version or record.version or ""
        want_config = dict(self.desired[package].config) if package in self.desired else {}
        # A pending change toward this very target carries the stages already done (by this run or
        # by an earlier one that was interrupted); anything else starts the change afresh.
        pending = record.pending
        if pending is not None and pending.version == want_version and pending.config == want_config:
            return pending
        return PendingChange(version=want_version, config=want_config, stages=work.stages)


def _completed(work: PackageWork, pending: PendingChange) -> PackageRecord:
    if work.action is Action.UNINSTALL:
        return PackageRecord()
    return PackageRecord(version=pending.version, config=pending.config)
