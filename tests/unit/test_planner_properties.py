"""Property tests of the rollout engine under arbitrary sequences of observations: the cap is never
exceeded by a start, canaries finish before anything else starts, a halt is absorbing, windows are
respected, no decision starts more than its cap, and the same inputs always give the same decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.node.state import PackageRecord
from fleetwright.planner.policy.model import (
    ApprovalStep,
    BatchesStep,
    Budget,
    CanaryStep,
    Compartment,
    FailurePolicy,
    RolloutPolicy,
    SoakStep,
    Step,
    Strategy,
    StrategyKind,
)
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.policy.windows import Window, fits
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeObservation, NodeWorkload, Observations, RunStatus
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.state import Decision, Phase, RolloutState

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 27, 18, 0, tzinfo=UTC)  # a DST change in Europe two days later
PACKAGES = (DesiredPackage(name="driver", version="2.0.0", interrupt=REBOOT),)


@st.composite
def policies(draw: st.DrawFn) -> RolloutPolicy:
    steps: list[Step] = []
    if draw(st.booleans()):
        steps.append(CanaryStep(count=draw(st.integers(1, 3))))
    if draw(st.booleans()):
        steps.append(SoakStep(duration_seconds=draw(st.sampled_from([0, 600, 7200])), health_gate=None))
    if draw(st.booleans()):
        steps.append(ApprovalStep(name="go", timeout_seconds=draw(st.sampled_from([None, 3600]))))
    strategy = Strategy(
        kind=draw(st.sampled_from(list(StrategyKind))),
        initial_batch=draw(st.integers(1, 4)),
        batch_threshold=draw(st.sampled_from([50, 100])),
        failure_threshold=draw(st.sampled_from([None, 1, 2])),
        safety_limit=draw(st.sampled_from([0, 50, 100])),
    )
    steps.append(BatchesStep(strategy=strategy, pause_seconds=draw(st.sampled_from([0, 300]))))
    compartments: tuple[Compartment, ...] = ()
    if draw(st.booleans()):
        compartments = (
            Compartment(
                name="odd",
                selector=Selector(match_labels={"parity": "odd"}),
                max_unavailable=Budget(count=draw(st.integers(1, 2))),
            ),
        )
    windows: tuple[Window, ...] = ()
    if draw(st.booleans()):
        windows = (
            Window(
                cron=draw(st.sampled_from(["0 22 * * *", "30 * * * *", "0 2 * * mon-fri"])),
                duration_seconds=draw(st.sampled_from([1800, 4 * 3600])),
                timezone=draw(st.sampled_from(["Europe/Berlin", "America/New_York", "UTC"])),
            ),
        )
    cap = draw(
        st.one_of(st.builds(Budget, count=st.integers(1, 4)), st.builds(Budget, percent=st.integers(1, 60)))
    )
    failure = FailurePolicy(max_failed_nodes=draw(st.sampled_from([None, 0, 2])))
    return RolloutPolicy(
        max_unavailable=cap, steps=tuple(steps), compartments=compartments, windows=windows, failure=failure
    )


def node(i: int, current: bool, job: int = 0) -> NodeObservation:
    return NodeObservation(
        name=f"n{i:02d}",
        labels={"topology.kubernetes.io/zone": f"z{i % 3}", "parity": "odd" if i % 2 else "even"},
        packages={"driver": PackageRecord(version="2.0.0" if current else "1.0.0")},
        workloads=(NodeWorkload(name=f"Job/ml/j{job}", gpus=8),) if job else (),
    )


# One round of the world: what happens to running nodes, to other nodes, and to time.
events = st.fixed_dictionaries(
    {
        # "recorded": the node workflow recorded the last stage and still runs (it uncordons next).
        "outcomes": st.lists(st.sampled_from(["run", "recorded", "ok", "fail"]), min_size=8, max_size=8),
        "flip": st.lists(
            st.tuples(st.integers(0, 19), st.sampled_from(["ready", "cordon", "busy", "calm"])), max_size=3
        ),
        "advance": st.sampled_from([0, 60, 900, 3600, 6 * 3600]),
        "approve": st.booleans(),
        "pause": st.integers(0, 9),
    }
)


@dataclass
class World:
    spec: RolloutSpec
    nodes: dict[str, NodeObservation]
    now: datetime = T0
    approvals: tuple[str, ...] = ()
    paused: bool = False
    halted: bool = False
    canaries_started: set[str] = field(default_factory=set)

    def observations(self) -> Observations:
        return Observations(nodes=tuple(self.nodes.values()), approvals=self.approvals, paused=self.paused)


def apply_events(world: World, state: RolloutState, round_: dict[str, object]) -> None:
    outcomes = round_["outcomes"]
    assert isinstance(outcomes, list)
    for index, run in enumerate(state.running):
        outcome = outcomes[index % len(outcomes)]
        if outcome == "recorded":
            current = {"driver": PackageRecord(version="2.0.0")}
            world.nodes[run.node] = world.nodes[run.node].model_copy(update={"packages": current})
        elif outcome != "run":
            status = RunStatus.SUCCEEDED if outcome == "ok" else RunStatus.FAILED
            world.nodes[run.node] = world.nodes[run.node].model_copy(update={"run": status})
    flips = round_["flip"]
    assert isinstance(flips, list)
    for i, what in flips:
        name = f"n{i:02d}"
        if name not in world.nodes or world.nodes[name].run is not None:
            continue
        updates: dict[str, dict[str, Any]] = {
            "ready": {"ready": False},
            "cordon": {"unschedulable": True},
            "busy": {"disruptions": ("profile/other in progress",)},
            "calm": {"ready": True, "unschedulable": False, "disruptions": ()},
        }
        world.nodes[name] = world.nodes[name].model_copy(update=updates[what])
    advance = round_["advance"]
    assert isinstance(advance, int)
    world.now += timedelta(seconds=advance)
    if round_["approve"]:
        world.approvals = ("rollout/go", "default/go", "odd/go")
    world.paused = round_["pause"] == 0


def others_unavailable(world: World) -> set[str]:
    return {n for n, o in world.nodes.items() if not o.ready or o.unschedulable or o.disruptions}


def check_invariants(world: World, before: RolloutState, decision: Decision) -> None:
    spec = world.spec
    # Nodes of ours that still hold a slot: started and not observed finished (or gone).
    finished = {n for n, o in world.nodes.items() if o.run in (RunStatus.SUCCEEDED, RunStatus.FAILED)}
    obs_running = {n for n, o in world.nodes.items() if o.run is RunStatus.RUNNING}
    ours = {r.node for r in before.running if r.node in world.nodes} - finished
    busy_before = ours | obs_running
    after = others_unavailable(world) | busy_before | {s.node for s in decision.start}
    cap = spec.policy.max_unavailable.resolve(len(world.nodes))
    adds = [s.node for s in decision.start if s.node not in others_unavailable(world) | busy_before]
    # The cap: a start that adds an unavailable node never takes the count past maxUnavailable.
    if adds:
        assert len(after) <= cap, (len(after), cap, adds)
        for compartment in spec.policy.compartments:
            members = {s.node for s in decision.start if s.compartment == compartment.name}
            if members & set(adds):
                in_compartment = {n for n in after if n in members or _in(world, n, compartment)}
                limit = (compartment.max_unavailable or spec.policy.max_unavailable).resolve(
                    sum(1 for n in world.nodes if _in(world, n, compartment))
                )
                assert len(in_compartment) <= limit
    # A node is done only when its workflow says so: while it reports running (its record may
    # already show the target) it holds its slot and the rollout is not complete.
    still = {r.node for r in before.running if r.node in obs_running}
    assert still <= {r.node for r in decision.state.running}
    assert not still & set(decision.state.updated)
    if still:
        assert decision.phase is not Phase.COMPLETE
    # Windows: every start fits the rest of an open window.
    for start in decision.start:
        assert fits(spec.policy.windows, world.now, start.expected_seconds)
        assert world.nodes[start.node].ready
        assert not world.nodes[start.node].disruptions
    # Canary first: while a chosen canary node is unfinished, only canary nodes start.
    canary = set(before.gates.canary or ())
    unfinished = {n for n in canary if n in world.nodes and n not in before.updated} - {
        f.node for f in before.failed
    }
    finished_now = {n for n in unfinished if world.nodes[n].run in (RunStatus.SUCCEEDED, RunStatus.FAILED)}
    if unfinished - finished_now:
        assert all(s.node in canary for s in decision.start)
    if any(f.node in canary for f in decision.state.failed):
        assert decision.phase is Phase.HALTED
    # A halt is absorbing.
    if world.halted:
        assert decision.phase is Phase.HALTED
        assert decision.start == ()
    world.halted = decision.phase is Phase.HALTED
    # Paused means nothing starts.
    if world.paused:
        assert decision.start == ()


def _in(world: World, node: str, compartment: Compartment) -> bool:
    return compartment.selector.matches(world.nodes[node].labels)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rollout=policies(),
    count=st.integers(1, 20),
    current=st.lists(st.booleans(), min_size=20, max_size=20),
    rounds=st.lists(events, min_size=1, max_size=25),
    max_starts=st.integers(1, 25),
    jobs=st.one_of(st.just([0] * 20), st.lists(st.integers(0, 4), min_size=20, max_size=20)),
)
def test_rollout_invariants_hold_under_any_sequence_of_observations(
    rollout: RolloutPolicy,
    count: int,
    current: list[bool],
    rounds: list[dict[str, object]],
    max_starts: int,
    jobs: list[int],
) -> None:
    """Also with workloads on the nodes (then units of nodes start together)."""
    spec = RolloutSpec(profile="p", packages=PACKAGES, policy=rollout)
    world = World(spec=spec, nodes={f"n{i:02d}": node(i, current[i], jobs[i]) for i in range(count)})
    state = begin(spec, world.now)
    for round_ in rounds:
        observations = world.observations()
        decision = decide(state, observations, world.now, max_starts=max_starts)
        # Same inputs, same decision (and the state survives a JSON round trip unchanged).
        assert decide(state, observations, world.now, max_starts=max_starts) == decision
        assert len(decision.start) <= max_starts
        assert RolloutState.model_validate_json(decision.state.model_dump_json()) == decision.state
        check_invariants(world, state, decision)
        for start in decision.start:
            world.nodes[start.node] = world.nodes[start.node].model_copy(update={"run": RunStatus.RUNNING})
        state = decision.state
        apply_events(world, state, round_)


@settings(max_examples=40, deadline=None)
@given(rounds=st.lists(events, min_size=1, max_size=15), count=st.integers(2, 12))
def test_a_halt_stays_halted_whatever_is_observed_next(rounds: list[dict[str, object]], count: int) -> None:
    rollout = RolloutPolicy(max_unavailable=Budget(count=2), steps=(CanaryStep(count=1), BatchesStep()))
    spec = RolloutSpec(profile="p", packages=PACKAGES, policy=rollout)
    world = World(spec=spec, nodes={f"n{i:02d}": node(i, False) for i in range(count)})
    first = decide(begin(spec, T0), world.observations(), T0)
    canary = first.start[0].node
    world.nodes[canary] = world.nodes[canary].model_copy(update={"run": RunStatus.FAILED})
    halted = decide(first.state, world.observations(), T0)
    assert halted.phase is Phase.HALTED
    state = halted.state
    for round_ in rounds:
        apply_events(world, state, round_)
        world.approvals = ("rollout/go",)
        # Even a fresh-looking fleet (everything succeeded, nothing unavailable) cannot restart it.
        for name in world.nodes:
            world.nodes[name] = world.nodes[name].model_copy(update={"run": None, "ready": True})
        decision = decide(state, world.observations(), world.now)
        assert decision.phase is Phase.HALTED
        assert decision.start == ()
        state = decision.state
