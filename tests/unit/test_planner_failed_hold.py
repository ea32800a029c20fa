"""Failed nodes left cordoned hold the budget (issue 37): when only this rollout's own failed nodes
hold it and nothing can start, the failure rule fires instead of the rollout staying Blocked for
good; anything else that holds a budget is a wait the status names."""

from __future__ import annotations

import pytest

from fleetwright.planner.node.interrupts import NO_INTERRUPT
from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.policy.model import Budget, Compartment, FailureAction, FailurePolicy
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.rollout.state import Decision, Phase
from tests.unit.test_planner_rollout import Fleet, batches, policy, started

pytestmark = pytest.mark.unit

LEFT = "left cordoned by this profile (its change failed)"


def fail_left_cordoned(fleet: Fleet, *names: str) -> None:
    """The node workflows failed and left their cordon, as a drained node's does."""
    fleet.finish(*names, ok=False)
    for name in names:
        fleet.set(name, own_cordon=True)


def tolerant(action: FailureAction, tolerated: int | None = 2) -> FailurePolicy:
    return FailurePolicy(max_failed_nodes=tolerated, action=action)


def first_batch_fails(fleet: Fleet) -> list[str]:
    first = started(fleet.decide())
    assert len(first) == 2
    fail_left_cordoned(fleet, *first)
    return first


@pytest.mark.parametrize(
    ("action", "phase"), [(FailureAction.HALT, Phase.HALTED), (FailureAction.ROLLBACK, Phase.ROLLED_BACK)]
)
def test_the_issue_scenario_fires_the_failure_action_once_its_failures_fill_the_budget(
    action: FailureAction, phase: Phase
) -> None:
    fleet = Fleet(8, policy(batches(initial=2), cap=2, failure=tolerant(action)))
    failed = first_batch_fails(fleet)
    decision = fleet.decide()
    assert decision.start == ()
    # The unit fleet records no package state, so a rollback has nothing to return: RolledBack.
    assert decision.phase is phase, decision.message
    if action is FailureAction.HALT:
        assert decision.state.halt is not None
        reason = decision.state.halt.reason
    else:
        assert decision.state.spec.rollback is not None, "no rollback began"
        reason = decision.state.spec.rollback.reason
    assert reason.startswith("no node can start: maxUnavailable 2 reached: ")
    for node in failed:
        assert f"{node} ({LEFT})" in reason
    assert "only this rollout's failed nodes hold it (maxFailedNodes 2 tolerates them)" in reason


def test_a_percentage_budget_fills_the_same_way() -> None:
    rollout = policy(batches(initial=2), failure=tolerant(FailureAction.HALT, None))
    fleet = Fleet(8, rollout.model_copy(update={"max_unavailable": Budget(percent=25)}))
    first_batch_fails(fleet)
    decision = fleet.decide()
    assert decision.phase is Phase.HALTED
    assert decision.message.startswith("no node can start: maxUnavailable 2 reached")
    assert "maxFailedNodes" not in decision.message  # None: the rule never fires by count


def test_a_running_node_holding_the_budget_too_is_a_wait_not_a_failure() -> None:
    fleet = Fleet(8, policy(batches(initial=3), cap=3, failure=tolerant(FailureAction.HALT, 5)))
    first = started(fleet.decide())
    fail_left_cordoned(fleet, *first[:2])
    decision = fleet.decide()
    assert decision.phase is Phase.PROGRESSING
    assert decision.state.halt is None


def test_a_not_ready_node_among_the_holders_blocks_and_is_named_first() -> None:
    fleet = Fleet(8, policy(batches(initial=2), cap=3, failure=tolerant(FailureAction.HALT, 5)))
    failed = first_batch_fails(fleet)
    other = next(n for n in sorted(fleet.nodes, reverse=True) if n not in failed)
    fleet.set(other, ready=False)
    decision = fleet.decide()
    assert decision.phase is Phase.BLOCKED
    assert decision.state.halt is None
    holders = [b.reason for b in decision.blocked if b.reason.startswith("Budget")]
    assert holders[0].startswith(f"Budget: maxUnavailable 3 reached: {other} (not Ready), "), holders
    fleet.set(other, ready=True)  # the cluster acts: one node of room again
    assert started(fleet.decide())


def test_failed_nodes_left_uncordoned_do_not_hold_the_budget() -> None:
    light = DesiredPackage(name="tool", version="2.0.0", interrupt=NO_INTERRUPT)
    fleet = Fleet(8, policy(batches(initial=2), cap=2, failure=tolerant(FailureAction.HALT)), (light,))
    first = started(fleet.decide())
    fleet.finish(*first, ok=False)  # no drain, so no cordon was left
    decision = fleet.decide()
    assert decision.phase is Phase.PROGRESSING
    assert len(started(decision)) == 2


def compartmented(action: FailureAction) -> Fleet:
    odd = Compartment(
        name="odd",
        selector=Selector(match_labels={"gpu": "gb200"}),
        max_unavailable=Budget(count=1),
        failure=FailurePolicy(max_failed_nodes=1, action=action),
    )
    rollout = policy(batches(initial=1), cap=2, compartments=(odd,), failure=tolerant(FailureAction.HALT, 9))
    return Fleet(8, rollout)


def test_a_compartment_whose_failures_fill_its_budget_fires_its_own_rule_at_once() -> None:
    fleet = compartmented(FailureAction.HALT)
    first = fleet.decide()
    assert sorted(s.compartment for s in first.start) == ["default", "odd"]
    odd = next(s.node for s in first.start if s.compartment == "odd")
    even = next(s.node for s in first.start if s.compartment == "default")
    fail_left_cordoned(fleet, odd)
    # No odd node can ever start again, so the rollout cannot complete: the compartment's rule
    # fires now, while the default compartment's node still runs (it finishes; nothing starts).
    decision = fleet.decide()
    assert decision.phase is Phase.HALTED, decision.message
    assert decision.start == ()
    assert [r.node for r in decision.state.running] == [even]
    assert decision.state.halt is not None
    assert decision.state.halt.scope == "odd"
    assert decision.message.startswith(f"no node can start: compartment odd maxUnavailable 1 reached: {odd}")
    assert "(maxFailedNodes 1 tolerates them)" in decision.message


def test_a_start_in_another_compartment_is_cancelled_by_the_firing() -> None:
    fleet = compartmented(FailureAction.HALT)
    first = fleet.decide()
    odd = next(s.node for s in first.start if s.compartment == "odd")
    fleet.finish_running(ok=True)
    fail_left_cordoned(fleet, odd)
    decision = fleet.decide()
    assert decision.phase is Phase.HALTED
    assert decision.start == ()
    assert decision.state.running == ()
    ran = {*decision.state.updated, *(f.node for f in decision.state.failed)}
    assert {n for s in decision.state.compartments for n in s.current} <= ran  # no batch of a cancelled start


def test_a_halt_is_absorbing_after_firing() -> None:
    fleet = Fleet(8, policy(batches(initial=2), cap=2, failure=tolerant(FailureAction.HALT)))
    first = first_batch_fails(fleet)
    assert fleet.decide().phase is Phase.HALTED
    for name in first:
        fleet.set(name, own_cordon=False)  # a human uncordoned them: a halt stays a halt
    again: Decision = fleet.decide()
    assert again.phase is Phase.HALTED
    assert again.start == ()
