"""Automatic rollback as the planner decides it: which nodes a rollback returns, what each package
returns to and with which stages, the engine's RollingBack and RolledBack phases under the same
budget, a rollback that fails halting instead of looping, and a node whose health gate failed
being re-gated on the returned version (failing again, it is hardware suspect: the rollback goes
on without it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.ledger import PackageLedger
from fleetwright.planner.node.packages import DesiredPackage, config_digests
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import Before, PackageRecord, PendingChange
from fleetwright.planner.node.work import NodeWork
from fleetwright.planner.policy.model import (
    BatchesStep,
    Budget,
    CanaryStep,
    FailureAction,
    FailurePolicy,
    RolloutPolicy,
    Strategy,
)
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin, retarget
from fleetwright.planner.rollout.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.rollout.preview import preview
from fleetwright.planner.rollout.rollback import (
    UNKNOWN_BEFORE,
    plan_node_rollback,
    recorded_previous,
    rollback_spec,
)
from fleetwright.planner.rollout.spec import RollbackOf, RolloutSpec
from fleetwright.planner.rollout.state import Decision, Phase, RolloutState

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
OLD_CONFIG = config_digests({"sysctl.conf": "vm.swappiness=10\n"})
NEW_CONFIG = config_digests({"sysctl.conf": "vm.swappiness=1\n"})
OLD = DesiredPackage(
    name="tuning", version="1.0.0", image="tuning:1.0.0", interrupt=REBOOT, config=OLD_CONFIG
)
NEW = OLD.model_copy(update={"version": "1.1.0", "image": "tuning:1.1.0"})
ADDED = DesiredPackage(name="extra", version="0.1.0", image="extra:0.1.0")
ROLLOUT = "t-new"
OF = RollbackOf(target=ROLLOUT, since=T0, reason="1 node(s) failed")


def spec(*packages: DesiredPackage, previous: tuple[DesiredPackage, ...] = (OLD,)) -> RolloutSpec:
    return rollback_spec(RolloutSpec(profile="p", packages=packages, previous=previous), OF)


def before(version: str | None = "1.0.0", config: dict[str, str] = OLD_CONFIG) -> Before:
    return Before(target=ROLLOUT, since=T0, version=version, config=config)


def stages(work: NodeWork) -> list[str]:
    return [f"{'+'.join(s.packages)}:{s.stage.value}" for s in work.steps]


def test_an_upgraded_node_is_downgraded_with_the_lower_versions_stages_and_its_interrupt() -> None:
    upgraded = PackageRecord(version="1.1.0", config=OLD_CONFIG, before=before())
    work = plan_node_rollback(spec(NEW), {"tuning": upgraded})
    assert stages(work) == ["tuning:apply", "tuning:config", "tuning:interrupt", "tuning:post-interrupt"]
    assert work.packages[0].from_version == "1.1.0"
    assert work.packages[0].to_version == "1.0.0"
    assert work.returns_to == (OLD,)  # the replaced spec's definition: its image and config
    assert work.needs_reboot


def test_the_failed_node_is_returned_too_although_its_record_still_says_the_old_version() -> None:
    failed = PackageRecord(
        version="1.0.0",
        config=OLD_CONFIG,
        pending=PendingChange(
            version="1.1.0",
            config=OLD_CONFIG,
            stages=(Stage.UPGRADE, Stage.CONFIG, Stage.INTERRUPT, Stage.POST_INTERRUPT),
            done=(Stage.UPGRADE,),
            failed="config: config-check exited 1",
        ),
        before=before(),
    )
    work = plan_node_rollback(spec(NEW), {"tuning": failed})
    assert stages(work)[0] == "tuning:apply"  # the upgrade ran: its host is 1.1.0 in part
    assert work.failed is None  # the forward failure is what is rolled back, not a rollback failure


def test_a_package_the_rollout_installed_is_uninstalled_and_a_config_change_reverted() -> None:
    installed = PackageRecord(version="0.1.0", before=before(version=None, config={}))
    configured = PackageRecord(version="1.0.0", config=NEW_CONFIG, before=before())
    changed = OLD.model_copy(update={"config": NEW_CONFIG})
    work = plan_node_rollback(spec(changed, ADDED), {"extra": installed, "tuning": configured})
    assert "extra:uninstall" in stages(work)
    assert "tuning:config" in stages(work)
    assert "tuning:apply" not in stages(work)  # same version: config only
    back = {p.name: p for p in work.returns_to or ()}
    assert back["extra"].uninstall
    assert back["tuning"].config == OLD_CONFIG


def test_nodes_the_rollout_did_not_change_get_no_work() -> None:
    untouched = PackageRecord(version="1.0.0", config=OLD_CONFIG)
    other = PackageRecord(
        version="1.1.0", config=OLD_CONFIG, before=before().model_copy(update={"target": "t-other"})
    )
    earlier = PackageRecord(
        version="1.1.0",
        config=OLD_CONFIG,
        before=before().model_copy(update={"since": T0 - timedelta(days=1)}),
    )
    for record in (untouched, other, earlier):
        assert not plan_node_rollback(spec(NEW), {"tuning": record}).needs_work


def test_a_before_the_replaced_spec_cannot_reproduce_is_blocked_not_guessed() -> None:
    record = PackageRecord(version="1.1.0", config=OLD_CONFIG, before=before(version="0.9.0"))
    work = plan_node_rollback(spec(NEW), {"tuning": record})
    assert not work.needs_work
    assert work.blocked[0].reason.startswith(UNKNOWN_BEFORE)


def test_a_return_resumes_after_its_last_passed_stage_and_ends_without_before() -> None:
    upgraded = PackageRecord(version="1.1.0", config=OLD_CONFIG, before=before())
    rollback = spec(NEW)
    work = plan_node_rollback(rollback, {"tuning": upgraded})
    ledger = PackageLedger("p", {"tuning": upgraded}, work, rollback.packages, (rollback.target, T0))
    ledger.stage_done("tuning", Stage.APPLY)
    resumed = plan_node_rollback(rollback, ledger.records)
    assert stages(resumed) == ["tuning:config", "tuning:interrupt", "tuning:post-interrupt"]
    ledger = PackageLedger("p", ledger.records, resumed, rollback.packages, (rollback.target, T0))
    for stage in (Stage.CONFIG, Stage.INTERRUPT, Stage.POST_INTERRUPT):
        ledger.stage_done("tuning", stage)
    assert ledger.records["tuning"] == PackageRecord(version="1.0.0", config=OLD_CONFIG)
    assert not plan_node_rollback(rollback, ledger.records).needs_work


def test_a_change_records_what_it_replaced_once_and_keeps_it_when_complete() -> None:
    forward = RolloutSpec(profile="p", packages=(NEW,))
    record = PackageRecord(version="1.0.0", config=OLD_CONFIG)
    from fleetwright.planner.node.work import plan_node  # noqa: PLC0415

    work = plan_node(forward.graph, {"tuning": record})
    ledger = PackageLedger("p", {"tuning": record}, work, forward.packages, (ROLLOUT, T0))
    for step in work.steps:
        ledger.stage_done("tuning", step.stage)
        assert ledger.records["tuning"].before == before()
    assert ledger.records["tuning"].version == "1.1.0"


# ---- the engine ------------------------------------------------------------------------------


class Fleet:
    """Nodes whose node workflows run their work through the ledger (every stage passes, or a
    node's first stage fails), so the records the rollback reads are the ones a rollout writes."""

    def __init__(self, count: int, cap: int = 2) -> None:
        self.records = {
            f"n{i:02d}": {"tuning": PackageRecord(version="1.0.0", config=OLD_CONFIG)} for i in range(count)
        }
        self.run: dict[str, RunStatus] = {}
        self.failing: set[str] = set()
        self.gate_failed: set[str] = set()
        """Nodes whose health gate failed: left cordoned, their condition says so."""
        self.works: dict[str, tuple[NodeWork, tuple[str, datetime]]] = {}
        """Each running node's work and the rollout it runs for (its node workflow's input)."""
        self.policy = RolloutPolicy(
            max_unavailable=Budget(count=cap),
            steps=(CanaryStep(count=1), BatchesStep(strategy=Strategy(initial_batch=4))),
            failure=FailurePolicy(max_failed_nodes=0, action=FailureAction.ROLLBACK),
        )
        self.spec = RolloutSpec(profile="p", packages=(NEW,), policy=self.policy, previous=(OLD,))
        self.state: RolloutState = begin(self.spec, T0)
        self.now = T0
        self.max_running = 0
        self.started: list[tuple[str, str]] = []
        self.demanded = ""
        """A rollback demanded from outside (a campaign's failure rule), passed in every observation."""

    def decide(self) -> Decision:
        nodes = tuple(
            NodeObservation(
                name=n,
                packages=self.records[n],
                run=self.run.get(n),
                own_cordon=n in self.gate_failed,
                gate_failed=n in self.gate_failed,
            )
            for n in sorted(self.records)
        )
        decision = decide(self.state, Observations(nodes=nodes, rollback=self.demanded), self.now)
        self.state = decision.state
        for start in decision.start:
            self.run[start.node] = RunStatus.RUNNING
            self.works[start.node] = (start.work, (self.state.spec.target, self.state.rollout_since))
            self.started.append((start.node, decision.phase.value))
        running = {r.node for r in self.state.running} | set(self.state.running_for_earlier_target)
        self.max_running = max(self.max_running, len(running))
        self.now += timedelta(minutes=1)
        return decision

    def finish(self, node: str) -> None:
        work, rollout = self.works.pop(node)
        ledger = PackageLedger("p", self.records[node], work, self.state.spec.packages, rollout)
        if node in self.failing:
            ledger.failed("tuning", f"{work.steps[0].stage.value}: exit 1")
            self.run[node] = RunStatus.FAILED
        else:
            for step in work.steps:
                ledger.stage_done("tuning", step.stage)
            self.run[node] = RunStatus.SUCCEEDED
        self.records[node] = ledger.records

    def record_failure(self, node: str) -> None:
        """The node's change fails and its record says so; its workflow has not reported yet."""
        work, rollout = self.works.pop(node)
        ledger = PackageLedger("p", self.records[node], work, self.state.spec.packages, rollout)
        ledger.failed("tuning", f"{work.steps[0].stage.value}: exit 1")
        self.records[node] = ledger.records

    def finish_all(self) -> None:
        for node in sorted(self.works):
            self.finish(node)


def run_until(fleet: Fleet, *phases: Phase, turns: int = 100) -> Decision:
    for _ in range(turns):
        decision = fleet.decide()
        if decision.phase in phases:
            return decision
        fleet.finish_all()
    raise AssertionError(f"never reached {phases}")


def test_a_failing_batch_rolls_back_exactly_the_nodes_the_rollout_changed_under_the_cap() -> None:
    fleet = Fleet(12, cap=2)
    fleet.decide()  # the canary
    fleet.finish_all()
    batch = fleet.decide()
    assert len(batch.start) == 2
    fleet.failing = {batch.start[0].node}
    fleet.finish(batch.start[0].node)  # fails; the other node of the batch still runs
    rolling = fleet.decide()
    assert rolling.phase is Phase.ROLLING_BACK
    assert "1 node(s) failed" in rolling.message
    changed = {n for n, _ in fleet.started}
    fleet.failing = set()
    done = run_until(fleet, Phase.ROLLED_BACK)
    returned = {n for n, phase in fleet.started if phase == Phase.ROLLING_BACK.value}
    assert returned == changed  # the failed node, the canary, the node still running: no other
    assert fleet.max_running <= 2
    for node, records in fleet.records.items():
        assert records["tuning"] == PackageRecord(version="1.0.0", config=OLD_CONFIG), node
    assert done.start == ()
    assert f"{len(changed)} node(s) returned" in done.message
    # Re-applying the spec it rolled back (or a policy edit of it) does not start it again.
    again = retarget(fleet.state, fleet.spec, fleet.now)
    fleet.state = again
    assert fleet.decide().phase is Phase.ROLLED_BACK
    assert fleet.decide().start == ()


def test_a_demanded_rollback_returns_the_changed_nodes_though_none_failed() -> None:
    # A campaign's failure rule fired in another cluster: this rollout failed nowhere, and its own
    # rule would never fire, yet it returns every node it changed, once.
    fleet = Fleet(8, cap=2)
    fleet.decide()
    fleet.finish_all()  # the canary
    fleet.decide()
    fleet.finish_all()  # a first batch
    changed = {n for n, _ in fleet.started}
    fleet.demanded = "campaign c1: 1 failed nodes over the clusters (east: 1)"
    rolling = fleet.decide()
    assert rolling.phase is Phase.ROLLING_BACK
    assert fleet.demanded in rolling.message
    done = run_until(fleet, Phase.ROLLED_BACK)
    assert {n for n, phase in fleet.started if phase == Phase.ROLLING_BACK.value} == changed
    for node, records in fleet.records.items():
        assert records["tuning"] == PackageRecord(version="1.0.0", config=OLD_CONFIG), node
    assert fleet.decide().phase is Phase.ROLLED_BACK  # the demand, still set, starts nothing again
    assert done.start == ()


def test_a_node_still_failing_its_change_when_the_rule_fires_is_returned_after_the_others() -> None:
    # Both nodes of a batch fail; the rule fires on the first while the second still runs its
    # change, and every other return ends before it does. The rollback must wait for it and return
    # it too, not call itself done once nothing is pending.
    fleet = Fleet(6, cap=2)
    fleet.decide()
    fleet.finish_all()  # the canary
    batch = fleet.decide()
    first, second = (s.node for s in batch.start)
    fleet.failing = {first, second}
    fleet.finish(first)
    assert fleet.decide().phase is Phase.ROLLING_BACK
    fleet.failing = set()
    for _ in range(10):
        others = [n for n in fleet.works if n != second]
        if not others:
            break
        for node in others:
            fleet.finish(node)
        assert fleet.decide().phase is Phase.ROLLING_BACK, "done while a changed node still runs"
    fleet.failing = {second}
    fleet.finish(second)  # its forward change fails too, after every other return
    fleet.failing = set()
    done = run_until(fleet, Phase.ROLLED_BACK)
    assert (second, Phase.ROLLING_BACK.value) in fleet.started
    for node, records in fleet.records.items():
        assert records["tuning"] == PackageRecord(version="1.0.0", config=OLD_CONFIG), node
    assert done.message.startswith("3 node(s) returned"), done.message  # canary, first, second


def test_nodes_whose_failure_fires_the_rule_before_their_workflows_report_are_returned_once_they_do() -> None:
    # The rule fires on failures read from the nodes' records while their node workflows still run
    # (they publish the failure, then report). The rollback waits for those workflows and then
    # returns the nodes; with nothing else to return it must not call itself done at once.
    fleet = Fleet(6, cap=2)
    canary = fleet.decide().start[0].node
    fleet.record_failure(canary)
    rolling = fleet.decide()
    assert rolling.phase is Phase.ROLLING_BACK, rolling.message
    assert rolling.start == (), "started a node whose workflow has not ended"
    assert rolling.state.running_for_earlier_target == (canary,)
    assert fleet.decide().phase is Phase.ROLLING_BACK
    fleet.run[canary] = RunStatus.FAILED  # its report arrives
    returning = fleet.decide()
    assert [s.node for s in returning.start] == [canary], returning.message
    done = run_until(fleet, Phase.ROLLED_BACK)
    assert fleet.records[canary]["tuning"] == PackageRecord(version="1.0.0", config=OLD_CONFIG)
    assert done.message.startswith("1 node(s) returned"), done.message


def test_a_rollback_that_fails_halts_and_says_so_without_rolling_back_again() -> None:
    fleet = Fleet(6, cap=1)
    first = fleet.decide()
    canary = first.start[0].node
    fleet.failing = {canary}
    fleet.finish(canary)
    rolling = fleet.decide()
    assert rolling.phase is Phase.ROLLING_BACK
    assert [s.node for s in rolling.start] == [canary]
    fleet.finish(canary)  # the return fails too
    halted = fleet.decide()
    assert halted.phase is Phase.HALTED
    assert halted.message.startswith("the rollback failed:")
    assert "it was rolling back: canary failed" in halted.message
    assert halted.start == ()
    assert fleet.decide().phase is Phase.HALTED  # absorbing: no rollback of the rollback


def test_without_the_replaced_spec_the_return_is_planned_from_the_recorded_befores() -> None:
    changed = PackageRecord(version="1.1.0", config=OLD_CONFIG, before=before())
    nodes = (
        NodeObservation(name="a", packages={"tuning": changed}),
        NodeObservation(name="b", packages={"tuning": PackageRecord(version="1.0.0", config=OLD_CONFIG)}),
    )
    forward = RolloutSpec(profile="p", packages=(NEW,))
    previous = recorded_previous(forward, Observations(nodes=nodes), OF)
    assert [(p.version, p.config, p.interrupt) for p in previous] == [("1.0.0", OLD_CONFIG, REBOOT)]
    plan = preview(rollback_spec(forward, OF, previous), Observations(nodes=nodes), T0)
    assert [(n.node, n.steps[0]) for n in plan.nodes] == [("a", "tuning:apply")]
    assert plan.eta is not None
    assert plan.blocked == ()


def test_a_rollback_re_gates_the_node_whose_gate_failed_and_only_that_one() -> None:
    fleet = Fleet(6, cap=2)
    canary = fleet.decide().start[0].node
    fleet.finish_all()
    batch = fleet.decide()
    assert all(not s.regate for s in batch.start)  # a forward change never re-gates
    bad = batch.start[0].node
    fleet.failing = {bad}
    fleet.gate_failed = {bad}
    fleet.finish_all()
    fleet.failing = set()
    rolling = fleet.decide()
    assert rolling.phase is Phase.ROLLING_BACK
    regated = {s.node for s in rolling.start if s.regate}
    assert regated == ({bad} & {s.node for s in rolling.start})
    starts = {s.node: s for s in rolling.start}
    run_state = {r.node: r.regate for r in rolling.state.running}
    assert all(run_state[n] == starts[n].regate for n in starts)
    assert canary not in regated


def test_a_re_gated_node_failing_again_is_hardware_suspect_and_the_rollback_returns_the_rest() -> None:
    fleet = Fleet(8, cap=1)
    canary = fleet.decide().start[0].node
    fleet.failing = {canary}
    fleet.gate_failed = {canary}
    fleet.finish(canary)
    rolling = fleet.decide()
    assert rolling.phase is Phase.ROLLING_BACK
    assert [(s.node, s.regate) for s in rolling.start] == [(canary, True)]
    fleet.finish(canary)  # its gate fails again on the returned version
    done = fleet.decide()
    assert done.phase is Phase.ROLLED_BACK, done.message  # not halted: its hardware, not the change
    assert [(f.node, f.suspect) for f in done.state.failed] == [(canary, True)]
    assert f"hardware suspect, kept cordoned: {canary}" in done.message, done.message


def test_a_node_cordoned_at_its_failed_gate_counts_against_the_budget() -> None:
    # A gate-failed node keeps fleetwright's cordon (with or without an interrupt): it holds its
    # part of maxUnavailable, and the rollout's other nodes wait for the room it leaves.
    fleet = Fleet(4, cap=1)
    fleet.policy = RolloutPolicy(
        max_unavailable=Budget(count=1),
        steps=(BatchesStep(strategy=Strategy(initial_batch=1)),),
        failure=FailurePolicy(max_failed_nodes=3, action=FailureAction.HALT),
    )
    fleet.spec = RolloutSpec(profile="p", packages=(NEW,), policy=fleet.policy, previous=(OLD,))
    fleet.state = begin(fleet.spec, T0)
    first = fleet.decide().start[0].node
    fleet.failing = {first}
    fleet.gate_failed = {first}
    fleet.finish(first)
    held = fleet.decide()
    assert held.start == ()
    assert f"{first} (left cordoned by this profile (its change failed))" in held.message, held.message
