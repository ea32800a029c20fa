"""Properties over policies and failure sequences (issue 37): every decision of a rollout either
progresses, fires its failure action, or waits on something a human or the cluster can change and
names it; it is never Blocked on its own failed nodes alone. Where nothing outside the rollout
changes, it always ends: Complete, Halted or RolledBack."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.planner.policy.model import (
    ApprovalStep,
    BatchesStep,
    Budget,
    CanaryStep,
    Compartment,
    FailureAction,
    FailurePolicy,
    RolloutPolicy,
    Step,
    Strategy,
    StrategyKind,
)
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import Observations, RunStatus
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.state import Decision, Phase
from tests.unit.test_planner_properties import PACKAGES, T0, node

pytestmark = pytest.mark.unit

LEFT = "(left cordoned by this profile (its change failed))"
ENDED = (Phase.COMPLETE, Phase.HALTED, Phase.ROLLED_BACK)

failures = st.builds(
    FailurePolicy,
    max_failed_nodes=st.sampled_from([None, 0, 1, 2, 3, 5]),
    action=st.sampled_from(list(FailureAction)),
)


def budgets(most: int) -> st.SearchStrategy[Budget]:
    return st.one_of(
        st.builds(Budget, count=st.integers(1, most)), st.builds(Budget, percent=st.integers(10, 50))
    )


@st.composite
def policies(draw: st.DrawFn) -> RolloutPolicy:
    steps: list[Step] = []
    if draw(st.booleans()):
        steps.append(CanaryStep(count=1))
    if draw(st.booleans()):
        steps.append(ApprovalStep(name="go"))
    strategy = Strategy(
        kind=draw(st.sampled_from(list(StrategyKind))),
        initial_batch=draw(st.integers(1, 3)),
        failure_threshold=draw(st.sampled_from([None, 2])),
    )
    steps.append(BatchesStep(strategy=strategy))
    compartments: tuple[Compartment, ...] = ()
    if draw(st.booleans()):
        own = draw(
            st.one_of(
                st.builds(Budget, count=st.integers(1, 2)), st.builds(Budget, percent=st.integers(10, 50))
            )
        )
        compartments = (
            Compartment(
                name="odd",
                selector=Selector(match_labels={"parity": "odd"}),
                max_unavailable=own,
                failure=draw(st.none() | failures),
            ),
        )
    cap = draw(
        st.one_of(st.builds(Budget, count=st.integers(1, 3)), st.builds(Budget, percent=st.integers(10, 50)))
    )
    return RolloutPolicy(
        max_unavailable=cap, steps=tuple(steps), compartments=compartments, failure=draw(failures)
    )


def only_failed_hold(reason: str) -> bool:
    """A budget refusal that names only nodes this rollout failed on (others' are named first)."""
    if not reason.startswith("Budget: "):
        return False
    holders = reason.split(" reached: ", 1)[1]
    return holders.split(", ", 1)[0].split(" and ", 1)[0].endswith(LEFT)


def names_what_holds_it(decision: Decision) -> bool:
    if "awaiting approval" in decision.message:
        return True  # a human approves
    return any(not only_failed_hold(b.reason) for b in decision.blocked)


FLIPS: dict[str, dict[str, Any]] = {
    "notready": {"ready": False},
    "cordon": {"unschedulable": True},
    "busy": {"disruptions": ("profile/other",)},
    "calm": {"ready": True, "unschedulable": False, "disruptions": ()},
}


class World:
    def __init__(self, policy: RolloutPolicy, size: int, drained: bool) -> None:
        self.spec = RolloutSpec(profile="p", packages=PACKAGES, policy=policy)
        self.nodes = {n.name: n for n in (node(i, current=False) for i in range(size))}
        self.drained = drained
        self.now = T0
        self.approvals: tuple[str, ...] = ()

    def set(self, name: str, **update: Any) -> None:
        self.nodes[name] = self.nodes[name].model_copy(update=update)

    def observations(self) -> Observations:
        return Observations(nodes=tuple(self.nodes.values()), approvals=self.approvals)

    def finish(self, name: str, ok: bool) -> None:
        if ok:
            self.set(name, run=RunStatus.SUCCEEDED)
        else:
            # A drained node's workflow leaves its cordon when the change fails there.
            self.set(name, run=RunStatus.FAILED, message="post-interrupt failed", own_cordon=self.drained)

    def outside(self, flips: list[tuple[int, str]]) -> None:
        for index, what in flips:
            name = f"n{index:02d}"
            if name not in self.nodes or self.nodes[name].run is not None:
                continue
            self.set(name, **FLIPS[what])


def run_rollout(world: World, rounds: list[dict[str, Any]]) -> list[Decision]:
    state = begin(world.spec, world.now)
    decisions: list[Decision] = []
    for round_ in rounds:
        decision = decide(state, world.observations(), world.now)
        decisions.append(decision)
        state = decision.state
        for start in decision.start:
            world.set(start.node, run=RunStatus.RUNNING)
        if decision.phase in ENDED:
            break
        outcomes = round_["outcomes"]
        for index, running in enumerate(state.running):
            outcome = outcomes[index % len(outcomes)]
            if outcome != "run":
                world.finish(running.node, ok=outcome == "ok")
        world.outside(round_["flip"])
        if round_["approve"]:
            world.approvals = tuple(world.spec.policy.approval_ids(s.name for s in state.compartments))
        world.now += timedelta(minutes=round_["advance"])
    return decisions


def rounds(outside: bool, finish_all: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    outcome = st.sampled_from(["ok", "fail"] if finish_all else ["ok", "fail", "run"])
    flip = st.tuples(st.integers(0, 11), st.sampled_from(["notready", "cordon", "busy", "calm"]))
    one = st.fixed_dictionaries(
        {
            "outcomes": st.lists(outcome, min_size=4, max_size=4),
            "flip": st.lists(flip, max_size=2) if outside else st.just([]),
            "approve": st.booleans() if outside else st.just(True),
            "advance": st.sampled_from([1, 60]),
        }
    )
    return st.lists(one, min_size=60, max_size=60)


# A world: a policy, a fleet of 3 to 12 nodes whose failed nodes are left cordoned or not (drained).
worlds = st.builds(World, policies(), st.integers(3, 12), st.booleans())
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(world=worlds, sequence=rounds(outside=True, finish_all=False))
def test_a_blocked_rollout_always_names_something_besides_its_own_failed_nodes(
    world: World, sequence: list[dict[str, Any]]
) -> None:
    for decision in run_rollout(world, sequence):
        if decision.phase is Phase.BLOCKED:
            assert names_what_holds_it(decision), (decision.message, decision.blocked)


@PROPERTY
@given(world=worlds, sequence=rounds(outside=False, finish_all=True))
def test_with_nothing_outside_changing_every_rollout_ends(
    world: World, sequence: list[dict[str, Any]]
) -> None:
    decisions = run_rollout(world, sequence)
    for decision in decisions:
        if decision.phase is Phase.BLOCKED:  # only ever on the approval, granted on the next round
            assert decision.message.startswith("awaiting approval"), (decision.message, decision.blocked)
    last = decisions[-1]
    assert last.phase in ENDED, (last.phase, last.message, len(decisions))
