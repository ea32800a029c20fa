"""The package state a node workflow records as its stages pass: a change carries its done stages
until the last one completes it, an interrupted change resumes toward the same target, another
target starts afresh, a failure is kept with the stages already done, an uninstall leaves no
record, and a state computed ahead of a stage records nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.ledger import PackageLedger
from fleetwright.planner.node.packages import DesiredPackage, PackageGraph, config_digests
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import PackageRecord, PendingChange
from fleetwright.planner.node.work import plan_node

pytestmark = pytest.mark.unit

CONFIG = config_digests({"sysctl.conf": "vm.max_map_count=262144\n"})


def tuning(version: str = "1.0.0", **extra: Any) -> DesiredPackage:
    return DesiredPackage(name="tuning", version=version, config=CONFIG, interrupt=REBOOT, **extra)


def ledger(desired: DesiredPackage, records: Mapping[str, PackageRecord] | None = None) -> PackageLedger:
    records = records or {}
    work = plan_node(PackageGraph([desired]), records)
    return PackageLedger("gpu", records, work, [desired])


def run(book: PackageLedger, *stages: Stage) -> None:
    for stage in stages:
        book.stage_done("tuning", stage)


def test_an_install_is_pending_with_its_done_stages_until_its_last_stage_completes_it() -> None:
    book = ledger(tuning())
    stages = book.works["tuning"].stages
    assert stages == (Stage.APPLY, Stage.CONFIG, Stage.INTERRUPT, Stage.POST_INTERRUPT)
    run(book, Stage.APPLY, Stage.CONFIG)
    pending = book.state().packages["tuning"].pending
    assert pending == PendingChange(version="1.0.0", config=CONFIG, stages=stages, done=stages[:2])
    assert book.state().packages["tuning"].version is None
    run(book, Stage.INTERRUPT, Stage.POST_INTERRUPT)
    assert book.state().packages == {"tuning": PackageRecord(version="1.0.0", config=CONFIG)}
    assert book.state().profile == "gpu"


def test_a_restarted_run_resumes_the_change_its_predecessor_began() -> None:
    first = ledger(tuning())
    run(first, Stage.APPLY)
    again = ledger(tuning(), first.records)
    run(again, Stage.CONFIG)
    pending = again.state().packages["tuning"].pending
    assert pending is not None
    assert pending.done == (Stage.APPLY, Stage.CONFIG)


def test_a_pending_change_toward_another_target_starts_afresh() -> None:
    old = PendingChange(
        version="0.9.0", config=CONFIG, stages=(Stage.APPLY, Stage.CONFIG), done=(Stage.APPLY,)
    )
    book = ledger(tuning(), {"tuning": PackageRecord(pending=old)})
    run(book, Stage.APPLY)
    pending = book.state().packages["tuning"].pending
    assert pending is not None
    assert (pending.version, pending.done) == ("1.0.0", (Stage.APPLY,))


def test_a_failure_keeps_the_done_stages_and_a_bounded_message_and_a_pass_clears_it() -> None:
    book = ledger(tuning())
    run(book, Stage.APPLY)
    book.failed("tuning", "config-check exited 1: " + "x" * 1000)
    pending = book.state().packages["tuning"].pending
    assert pending is not None
    assert pending.done == (Stage.APPLY,)
    assert pending.failed is not None
    assert pending.failed.startswith("config-check exited 1")
    assert len(pending.failed) == 500
    run(book, Stage.CONFIG)
    after = book.state().packages["tuning"].pending
    assert after is not None
    assert after.failed is None


def test_an_uninstall_leaves_an_empty_record() -> None:
    installed = {"tuning": PackageRecord(version="1.0.0", config=CONFIG)}
    book = ledger(tuning(uninstall=True), installed)
    run(book, *book.works["tuning"].stages)
    assert book.state().packages == {"tuning": PackageRecord()}


def test_the_states_after_stages_are_computed_each_after_the_last_without_recording_them() -> None:
    book = ledger(tuning())
    before = book.state()
    after_apply, after_config = book.states_after([(("tuning",), Stage.APPLY), (("tuning",), Stage.CONFIG)])
    assert book.state() == before
    pending = after_config.packages["tuning"].pending
    assert pending is not None
    assert pending.done == (Stage.APPLY, Stage.CONFIG)
    run(book, Stage.APPLY)
    assert book.state() == after_apply
    run(book, Stage.CONFIG)
    assert book.state() == after_config
