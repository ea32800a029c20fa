"""Rollout decisions, scenario by scenario: canary, soak, approval, batches under the cap, other
disruptions, compartments, windows, failure rules, spec changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.packages import ConfigInterruptRule, DesiredPackage, config_digests
from fleetwright.planner.node.state import PackageRecord
from fleetwright.planner.policy.model import (
    ApprovalStep,
    BatchesStep,
    Budget,
    CanaryStep,
    Compartment,
    FailureAction,
    FailurePolicy,
    HealthGate,
    RolloutPolicy,
    SoakStep,
    Step,
    Strategy,
    StrategyKind,
)
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.policy.windows import Window
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin, retarget
from fleetwright.planner.rollout.observations import NodeObservation, Observations, RunStatus
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.state import Decision, Phase, RolloutState

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
DRIVER = DesiredPackage(name="driver", version="2.0.0", interrupt=REBOOT)


def policy(*steps: Step, cap: int = 2, **kw: Any) -> RolloutPolicy:
    return RolloutPolicy(max_unavailable=Budget(count=cap), steps=steps, **kw)


def batches(kind: StrategyKind = StrategyKind.FIXED, initial: int = 1, **kw: Any) -> BatchesStep:
    return BatchesStep(strategy=Strategy(kind=kind, initial_batch=initial, **kw))


class Fleet:
    """A hand-driven fleet: nodes, their run status, time, and the rollout state."""

    def __init__(
        self, count: int, rollout: RolloutPolicy, packages: tuple[DesiredPackage, ...] = (DRIVER,)
    ) -> None:
        self.nodes = {
            f"n{i:02d}": NodeObservation(
                name=f"n{i:02d}",
                labels={"topology.kubernetes.io/zone": f"z{i % 3}", "gpu": "gb200" if i % 2 else "h100"},
            )
            for i in range(count)
        }
        self.spec = RolloutSpec(profile="p", packages=packages, policy=rollout)
        self.state: RolloutState = begin(self.spec, T0)
        self.now = T0
        self.approvals: tuple[str, ...] = ()
        self.paused = False

    def set(self, name: str, **update: object) -> None:
        self.nodes[name] = self.nodes[name].model_copy(update=update)

    def decide(self, **options: Any) -> Decision:
        obs = Observations(nodes=tuple(self.nodes.values()), approvals=self.approvals, paused=self.paused)
        decision = decide(self.state, obs, self.now, **options)
        self.state = decision.state
        for start in decision.start:
            self.set(start.node, run=RunStatus.RUNNING)
        return decision

    def finish(self, *names: str, ok: bool = True) -> None:
        for name in names:
            self.set(name, run=RunStatus.SUCCEEDED if ok else RunStatus.FAILED, message="" if ok else "boom")

    def finish_running(self, ok: bool = True) -> list[str]:
        names = [r.node for r in self.state.running]
        self.finish(*names, ok=ok)
        return names


def started(decision: Decision) -> list[str]:
    return [s.node for s in decision.start]


def test_canary_completes_before_anything_else_and_a_failed_canary_halts() -> None:
    fleet = Fleet(6, policy(CanaryStep(count=1), batches(initial=3), cap=3))
    first = fleet.decide()
    assert len(first.start) == 1
    assert first.start[0].batch == 0
    assert fleet.decide().start == ()  # canary still running: nothing else starts
    fleet.finish_running(ok=False)
    halted = fleet.decide()
    assert halted.phase is Phase.HALTED
    assert "canary failed" in halted.message
    assert "boom" in halted.message
    assert halted.start == ()


def test_a_batch_wider_than_a_decisions_starts_fills_over_the_next_decisions() -> None:
    fleet = Fleet(10, policy(batches(initial=10), cap=10))
    sizes, waits, messages = [], [], []
    for _ in range(4):
        decision = fleet.decide(max_starts=3)
        sizes.append(len(decision.start))
        waits.append(decision.wake_at)
        messages.append(decision.message)
        assert {s.batch for s in decision.start} == {1}  # one batch, started over four decisions
        fleet.now += timedelta(seconds=1)
    assert sizes == [3, 3, 3, 1]
    assert waits[:3] == [T0 + timedelta(seconds=s) for s in (1, 2, 3)]  # the next decision a second on
    assert "at most 3 per decision" in messages[0]
    assert "per decision" not in messages[3]
    assert waits[3] is None  # everything started: nothing more to fill
    assert len(fleet.state.running) == 10


def test_a_canary_wider_than_a_decisions_starts_starts_over_several() -> None:
    fleet = Fleet(4, policy(CanaryStep(count=2), batches(initial=2), cap=4))
    first = fleet.decide(max_starts=1)
    assert [s.batch for s in first.start] == [0]
    assert first.wake_at == T0 + timedelta(seconds=1)
    fleet.now += timedelta(seconds=1)
    second = fleet.decide(max_starts=1)
    assert [s.batch for s in second.start] == [0]  # the second canary; nothing else yet
    assert second.wake_at is None
    assert fleet.decide(max_starts=1).start == ()


def test_successful_canary_then_batches_grow() -> None:
    fleet = Fleet(8, policy(CanaryStep(count=1), batches(StrategyKind.EXPONENTIAL), cap=8))
    fleet.decide()
    fleet.finish_running()
    sizes = []
    for _ in range(10):
        decision = fleet.decide()
        if decision.phase is Phase.COMPLETE:
            break
        sizes.append(len(decision.start))
        fleet.finish_running()
    assert sizes == [1, 2, 4]  # 7 nodes after the canary: 1, 2, then the 4 left
    assert decision.phase is Phase.COMPLETE
    assert len(fleet.state.updated) == 8


def test_soak_waits_its_duration_and_its_health_gate_halts_on_an_unready_updated_node() -> None:
    gate = HealthGate(node_ready=True, conditions={"GpuHealthy": "True"})
    fleet = Fleet(4, policy(CanaryStep(count=1), SoakStep(duration_seconds=600, health_gate=gate), batches()))
    canary = started(fleet.decide())[0]
    fleet.set(canary, conditions={"GpuHealthy": "True"})
    fleet.finish(canary)
    waiting = fleet.decide()
    assert waiting.phase is Phase.WAITING
    assert waiting.wake_at == T0 + timedelta(seconds=600)
    assert waiting.watch_fleet  # the gate must see a node turn unhealthy before the soak ends
    fleet.now = T0 + timedelta(seconds=300)
    fleet.set(canary, conditions={"GpuHealthy": "False"})
    halted = fleet.decide()
    assert halted.phase is Phase.HALTED
    assert "GpuHealthy=False" in halted.message


def test_soak_passes_after_its_duration() -> None:
    fleet = Fleet(3, policy(CanaryStep(count=1), SoakStep(duration_seconds=600, health_gate=None), batches()))
    fleet.decide()
    fleet.finish_running()
    assert fleet.decide().start == ()
    fleet.now = T0 + timedelta(seconds=600)
    assert len(fleet.decide().start) == 1


def test_approval_gate_waits_for_its_id_and_halts_on_timeout() -> None:
    fleet = Fleet(3, policy(ApprovalStep(name="go", timeout_seconds=3600), batches()))
    waiting = fleet.decide()
    assert waiting.start == ()
    assert "rollout/go" in waiting.message
    assert waiting.wake_at == T0 + timedelta(hours=1)
    fleet.approvals = ("rollout/go",)
    assert len(fleet.decide().start) == 1

    late = Fleet(3, policy(ApprovalStep(name="go", timeout_seconds=3600), batches()))
    late.decide()
    late.now = T0 + timedelta(hours=1)
    assert late.decide().phase is Phase.HALTED


def test_the_approval_ids_a_human_may_approve_are_scoped_by_gate_or_compartment() -> None:
    gated = Compartment(
        name="gb200",
        selector=Selector(match_labels={"gpu": "gb200"}),
        steps=(ApprovalStep(name="go-gb200"), BatchesStep(name="rest")),
    )
    rollout_policy = policy(ApprovalStep(name="go"), batches(), compartments=(gated,))
    assert rollout_policy.approval_ids() == ["gb200/go-gb200", "rollout/go"]
    # A compartment the rollout has but the policy no longer names runs the default batches.
    assert rollout_policy.approval_ids(["default", "gb200"]) == ["gb200/go-gb200", "rollout/go"]
    assert policy(batches()).approval_ids(["default"]) == []


def test_a_rollout_with_nothing_to_do_completes_without_waiting_for_gates() -> None:
    fleet = Fleet(3, policy(ApprovalStep(), SoakStep(duration_seconds=3600), batches()))
    for name in fleet.nodes:
        fleet.set(name, packages={"driver": PackageRecord(version="2.0.0")})
    assert fleet.decide().phase is Phase.COMPLETE


def test_nodes_unavailable_for_other_reasons_use_up_the_cap() -> None:
    fleet = Fleet(10, policy(batches(initial=10), cap=3))
    fleet.set("n00", ready=False)
    fleet.set("n01", disruptions=("profile/security-agent in progress",))
    decision = fleet.decide()
    assert len(decision.start) == 1
    assert decision.counts.unavailable == 3
    # n00 and n01 cannot be worked on themselves; the rest wait for the node this rollout
    # started, which holds part of the budget.
    assert {b.node for b in decision.blocked} == {"n00", "n01"}
    assert decision.counts.waiting == 7
    reason = decision.waiting[0].reason
    assert "n00 (not Ready)" in reason
    assert "n01 (profile/security-agent in progress)" in reason
    assert "n00" not in started(decision)
    assert "n01" not in started(decision)


def test_a_healthy_rollout_waits_for_its_own_budget_and_blocks_nothing() -> None:
    fleet = Fleet(10, policy(batches(initial=10), cap=1))
    decision = fleet.decide()
    assert len(decision.start) == 1
    decision = fleet.decide()
    assert decision.phase is Phase.PROGRESSING
    assert decision.counts.blocked == 0
    assert not decision.blocked
    assert not decision.blocked_reasons
    assert decision.counts.waiting == 9
    (ours,) = decision.state.running
    assert decision.waiting[0].reason == (
        f"Budget: maxUnavailable 1 reached: {ours.node} (being updated by this profile)"
    )


def test_a_node_cordoned_by_someone_else_that_holds_the_budget_blocks_the_rollout_by_name() -> None:
    # The cordoned node carries the target already: nothing of this rollout can free the budget.
    fleet = Fleet(3, policy(batches(initial=3), cap=1))
    fleet.set("n01", unschedulable=True, packages={"driver": PackageRecord(version="2.0.0")})
    decision = fleet.decide()
    assert decision.phase is Phase.BLOCKED
    assert not decision.start
    assert decision.counts.blocked == 2
    assert decision.counts.waiting == 0
    expected = "Budget: maxUnavailable 1 reached: n01 (cordoned by someone else)"
    assert {b.reason for b in decision.blocked} == {expected}
    assert decision.message == f"2 node(s) blocked, first {decision.blocked[0].node}: {expected}"
    fleet.set("n01", unschedulable=False)  # uncordoned: the rollout moves on its own
    assert len(fleet.decide().start) == 1


def test_the_fleet_is_watched_only_while_something_besides_its_own_nodes_can_change_the_decision() -> None:
    # Only its running nodes' reports can move this rollout on: no re-observation needed.
    own = Fleet(10, policy(batches(initial=10), cap=3))
    assert len(own.decide().start) == 3
    waiting = own.decide()
    assert waiting.counts.waiting == 7
    assert not waiting.watch_fleet
    # Another profile's work holds part of the budget: it can end without a report to this rollout.
    shared = Fleet(10, policy(batches(initial=10), cap=3))
    shared.set("n09", disruptions=("profile/security-agent in progress",))
    shared.set("n09", packages={"driver": PackageRecord(version="2.0.0")})  # needs no work here
    assert len(shared.decide().start) == 2
    held = shared.decide()
    assert not held.blocked
    assert held.watch_fleet
    # A blocked node (NotReady) starts once it is Ready again, which only the fleet shows.
    blocked = Fleet(3, policy(batches(initial=3), cap=3))
    blocked.set("n00", ready=False)
    assert blocked.decide().watch_fleet
    # Nodes still running for an earlier target are looked up, not reported.
    earlier = Fleet(3, policy(batches(initial=3), cap=3))
    earlier.state = earlier.state.model_copy(update={"running_for_earlier_target": ("n02",)})
    earlier.set("n02", run=RunStatus.RUNNING)
    assert earlier.decide().watch_fleet


def test_the_complete_message_counts_the_nodes_that_carry_the_target() -> None:
    fleet = Fleet(2, policy(batches(initial=2), cap=2))
    fleet.set("n00", packages={"driver": PackageRecord(version="2.0.0")})  # updated before this pass
    fleet.decide()
    for node in fleet.finish_running():
        fleet.set(node, packages={"driver": PackageRecord(version="2.0.0")})
    decision = fleet.decide()
    assert decision.phase is Phase.COMPLETE
    # This pass updated one node; the status shows 2/2, and so does the message.
    assert len(decision.state.updated) == 1
    assert decision.message == "2/2 nodes updated"


def test_a_foreign_cordon_is_worked_under_at_no_extra_cost() -> None:
    fleet = Fleet(3, policy(batches(initial=3), cap=1))
    fleet.set("n02", unschedulable=True)  # already unavailable: the cap is used up by it
    decision = fleet.decide()
    assert started(decision) == ["n02"]  # the only start that does not add an unavailable node


def test_a_node_cordoned_by_someone_else_mid_rollout_waits_for_our_own_node() -> None:
    # docs/chaos.md, finding 5: maxUnavailable 1, our node mid-update, then someone
    # cordons a pending node. It still runs its pods: working under that cordon (draining it) while
    # our node is disrupted would disrupt two nodes for this profile.
    fleet = Fleet(3, policy(batches(initial=3), cap=1))
    ours = started(fleet.decide())
    assert len(ours) == 1
    cordoned = next(n for n in fleet.nodes if n not in ours)
    fleet.set(cordoned, unschedulable=True)
    decision = fleet.decide()
    assert started(decision) == []
    assert any(b.node == cordoned and b.reason.startswith("Budget") for b in decision.waiting)
    fleet.finish_running()
    # Once ours is done, the cordoned node is the one start that adds no unavailable node.
    assert started(fleet.decide()) == [cordoned]


def test_config_change_with_reboot_interrupt_on_50_nodes_respects_a_budget_of_1() -> None:
    # NodeWright's suspected bypass: config changes marked every node in progress at once.
    old = config_digests({"grub.cfg": "quiet"})
    new = config_digests({"grub.cfg": "quiet iommu=pt"})
    rules = (ConfigInterruptRule(pattern="grub*", interrupt=REBOOT),)
    tuning = DesiredPackage(name="tuning", version="1.0.0", config=new, config_interrupts=rules)
    fleet = Fleet(50, policy(batches(StrategyKind.EXPONENTIAL, initial=50), cap=1), packages=(tuning,))
    for name in fleet.nodes:
        fleet.set(name, packages={"tuning": PackageRecord(version="1.0.0", config=old)})
    seen = 0
    for _ in range(200):
        decision = fleet.decide()
        assert len(fleet.state.running) <= 1
        assert all(s.work.needs_reboot for s in decision.start)
        seen += len(decision.start)
        if decision.phase is Phase.COMPLETE:
            break
        fleet.finish_running()
    assert seen == 50


def test_a_spec_change_mid_rollout_keeps_running_nodes_on_the_budget() -> None:
    fleet = Fleet(6, policy(batches(initial=2), cap=2))
    running = started(fleet.decide())
    assert len(running) == 2
    newer = RolloutSpec(
        profile="p", packages=(DRIVER.model_copy(update={"version": "2.1.0"}),), policy=fleet.spec.policy
    )
    fleet.state = retarget(fleet.state, newer, fleet.now)
    assert set(fleet.state.running_for_earlier_target) == set(running)
    assert fleet.decide().start == ()  # the old target's two nodes still hold the cap
    fleet.finish(*running)
    assert len(fleet.decide().start) == 2


def test_a_policy_only_change_keeps_progress() -> None:
    fleet = Fleet(4, policy(batches(initial=1), cap=1))
    fleet.decide()
    fleet.finish_running()
    fleet.decide()
    faster = fleet.spec.model_copy(update={"policy": policy(batches(initial=1), cap=3)})
    state = retarget(fleet.state, faster, fleet.now)
    assert state.updated == fleet.state.updated
    assert state.running == fleet.state.running


def test_failed_nodes_beyond_max_failed_nodes_halt_with_the_configured_action() -> None:
    halt = FailurePolicy(max_failed_nodes=1, action=FailureAction.HALT)
    fleet = Fleet(6, policy(batches(initial=1), cap=1, failure=halt))
    for _ in range(2):
        fleet.decide()
        fleet.finish_running(ok=False)
    halted = fleet.decide()
    assert halted.phase is Phase.HALTED
    assert halted.state.halt is not None
    assert halted.state.halt.action is FailureAction.HALT
    assert len(halted.state.failed) == 2


def test_consecutive_failed_batches_stop_the_rollout_below_the_safety_limit() -> None:
    tolerant = FailurePolicy(max_failed_nodes=None)
    fleet = Fleet(20, policy(batches(StrategyKind.LINEAR, failure_threshold=2), cap=5, failure=tolerant))
    phases = []
    for _ in range(5):
        decision = fleet.decide()
        phases.append(decision.phase)
        if decision.phase is Phase.HALTED:
            break
        fleet.finish_running(ok=False)
    assert phases[-1] is Phase.HALTED
    assert "consecutive failed batches" in decision.message
    assert len(fleet.state.failed) == 2  # batches of 1 and 1: linear shrinks to at least one


def test_compartments_have_their_own_caps_and_steps_and_overlaps_take_the_safest() -> None:
    gb200 = Compartment(
        name="gb200",
        selector=Selector(match_labels={"gpu": "gb200"}),
        max_unavailable=Budget(count=1),
        steps=(batches(initial=5),),
    )
    wide = Compartment(
        name="wide", selector=Selector(match_labels={"gpu": "gb200"}), max_unavailable=Budget(count=4)
    )
    fleet = Fleet(8, policy(batches(initial=5), cap=10, compartments=(gb200, wide)))
    decision = fleet.decide()
    by_compartment: dict[str, int] = {}
    for start in decision.start:
        by_compartment[start.compartment] = by_compartment.get(start.compartment, 0) + 1
    assert by_compartment == {"gb200": 1, "default": 4}  # no node lands in 'wide': gb200 is safer


def test_nodes_start_only_when_their_work_fits_the_open_window() -> None:
    window = Window(cron="0 22 * * *", duration_seconds=3600, timezone="Europe/Berlin")
    fleet = Fleet(2, policy(batches(initial=2), cap=2, windows=(window,)))
    fleet.now = datetime(2026, 1, 5, 21, 45, tzinfo=UTC)  # 22:45 in Berlin: 15 minutes left
    decision = fleet.decide()
    assert decision.start == ()  # a driver upgrade with reboot and drain is expected to take 19 minutes
    # A window opens by itself: the nodes wait, nothing is blocked.
    assert not decision.blocked_reasons
    assert decision.phase is Phase.WAITING
    assert [w.reason.split(":")[0] for w in decision.waiting] == ["OutsideWindow"] * 2
    assert decision.wake_at == datetime(2026, 1, 6, 21, 0, tzinfo=UTC)
    fleet.now = decision.wake_at
    assert len(fleet.decide().start) == 2


def test_a_deleted_node_releases_its_slot() -> None:
    fleet = Fleet(3, policy(batches(initial=1), cap=1))
    gone = started(fleet.decide())[0]
    del fleet.nodes[gone]
    decision = fleet.decide()
    assert len(decision.start) == 1
    assert gone not in {r.node for r in fleet.state.running}


def test_a_node_is_done_when_its_workflow_reports_not_when_its_record_shows_the_target() -> None:
    # The node workflow records the last stage, then uncordons and releases the runtime taint: until
    # it reports, the node holds its slot and the rollout is not complete.
    fleet = Fleet(2, policy(batches(initial=1), cap=1, node_gate=True))
    first = started(fleet.decide())
    fleet.set(first[0], packages={"driver": PackageRecord(version="2.0.0")})
    recorded = fleet.decide()
    assert [r.node for r in recorded.state.running] == first
    assert recorded.state.updated == ()
    assert recorded.start == ()  # the slot is still the running node's
    assert recorded.phase is Phase.PROGRESSING
    # Its stages are done but it is not updated yet (at its node gate, say): not counted complete.
    assert (recorded.counts.needs_work, recorded.counts.unproven) == (1, 1)
    fleet.finish(*first)
    assert len(fleet.decide().start) == 1
    fleet.finish_running()
    for name in fleet.nodes:
        fleet.set(name, packages={"driver": PackageRecord(version="2.0.0")})
    assert fleet.decide().phase is Phase.COMPLETE


def test_a_node_that_failed_after_its_last_stage_is_not_counted_updated() -> None:
    # Its node gate failed: it carries the packages but is not updated, nor does it need work.
    fleet = Fleet(2, policy(batches(initial=1), cap=1, node_gate=True))
    first = started(fleet.decide())
    fleet.set(first[0], packages={"driver": PackageRecord(version="2.0.0")})
    fleet.finish(*first, ok=False)
    failed = fleet.decide()
    assert [f.node for f in failed.state.failed] == first
    assert (failed.counts.targeted, failed.counts.needs_work, failed.counts.unproven) == (2, 1, 1)


def test_without_a_node_gate_no_node_is_unproven_so_the_previous_release_reads_the_counts() -> None:
    # The same nodes as above (one done and still running, one done and failed): with no gate in
    # the policy none waits for one, and the decision writes what 0.1.0 wrote (no ``unproven``).
    fleet = Fleet(3, policy(batches(initial=2), cap=2))
    first = started(fleet.decide())
    for name in first:
        fleet.set(name, packages={"driver": PackageRecord(version="2.0.0")})
    fleet.finish(first[1], ok=False)
    decision = fleet.decide()
    assert ([r.node for r in decision.state.running], [f.node for f in decision.state.failed]) == (
        first[:1],
        first[1:],
    )
    assert decision.counts.unproven == 0
    assert "unproven" not in decision.model_dump(mode="json")["counts"]


def test_pause_starts_nothing_but_is_not_a_halt() -> None:
    fleet = Fleet(3, policy(batches(initial=1), cap=1))
    fleet.paused = True
    assert fleet.decide().phase is Phase.PAUSED
    fleet.paused = False
    assert len(fleet.decide().start) == 1


def test_state_round_trips_through_json() -> None:
    fleet = Fleet(5, policy(CanaryStep(count=1), batches(StrategyKind.EXPONENTIAL), cap=2))
    decision = fleet.decide()
    assert RolloutState.model_validate_json(fleet.state.model_dump_json()) == fleet.state
    assert Decision.model_validate_json(decision.model_dump_json()) == decision
