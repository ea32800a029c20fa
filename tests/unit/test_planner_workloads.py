"""Workload-aware ordering: idle nodes first, a workload's nodes in one batch when they fit the
cap (consecutive batches when they do not, said so), the budget never exceeded, the same order for
the same fleet whatever order it is read in, and exactly the plain zone-spread order when nothing is
known about workloads; the policy's bounded wait for a node's workloads to finish; and which
policies make a turn read pods at all."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.node.state import PackageRecord
from fleetwright.planner.policy.model import (
    BatchesStep,
    Budget,
    CanaryStep,
    Compartment,
    RolloutPolicy,
    Strategy,
    StrategyKind,
    WorkloadWait,
)
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.policy.windows import Window
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import NodeObservation, NodeWorkload, Observations, RunStatus
from fleetwright.planner.rollout.ordering import OrderInput, order_by_workloads, order_nodes
from fleetwright.planner.rollout.preview import Plan, preview
from fleetwright.planner.rollout.spec import RolloutSpec

pytestmark = pytest.mark.unit

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
PACKAGES = (DesiredPackage(name="driver", version="2.0.0", interrupt=REBOOT),)
ZONE = "topology.kubernetes.io/zone"


def node(i: int, jobs: tuple[str, ...] = ()) -> NodeObservation:
    return NodeObservation(
        name=f"gpu-{i:03d}",
        labels={ZONE: f"z{i % 3}"},
        packages={"driver": PackageRecord(version="1.0.0")},
        workloads=tuple(NodeWorkload(name=j, pods=1, gpus=8) for j in jobs),
    )


def fleet(jobs: list[int]) -> list[NodeObservation]:
    """Node i runs job ``jobs[i]`` (0: idle)."""
    return [node(i, (f"Job/ml/j{j}",) if j else ()) for i, j in enumerate(jobs)]


def spec(cap: int, initial: int, kind: StrategyKind = StrategyKind.FIXED, canary: int = 0) -> RolloutSpec:
    steps = (CanaryStep(count=canary),) if canary else ()
    batches = BatchesStep(strategy=Strategy(kind=kind, initial_batch=initial))
    policy = RolloutPolicy(max_unavailable=Budget(count=cap), steps=(*steps, batches))
    return RolloutSpec(profile="p", packages=PACKAGES, policy=policy)


def planned(rollout: RolloutSpec, nodes: list[NodeObservation]) -> Plan:
    return preview(rollout, Observations(nodes=tuple(nodes)), T0)


def starts_by_workload(plan: Plan, nodes: list[NodeObservation]) -> dict[str, set[tuple[str, int]]]:
    """Each workload's (scope, batch) pairs its nodes started in."""
    batch_of = {p.node: (p.scope, p.batch) for p in plan.nodes}
    out: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for n in nodes:
        for w in n.workloads:
            out[w.name].add(batch_of[n.name])
    return out


def max_concurrent(plan: Plan) -> int:
    edges = sorted([(p.start, 1) for p in plan.nodes] + [(p.end, -1) for p in plan.nodes])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_without_workloads_the_order_is_the_zone_spread_order() -> None:
    nodes = fleet([0] * 30)
    prepared_order = decide(begin(spec(4, 4), T0), Observations(nodes=tuple(nodes)), T0)
    expected = order_nodes((n.name, n.labels) for n in nodes)
    assert [s.node for s in prepared_order.start] == expected[:4]
    inputs = [OrderInput(n.name, n.labels) for n in nodes]
    assert order_by_workloads(inputs, {"": 4}).order == expected


def test_idle_nodes_go_first_then_each_workload_whole() -> None:
    # Jobs packed by rack, as a scheduler places them: j1 on 0-3, j2 on 4-5, idle 6-7, j3 on 8-11.
    nodes = fleet([1, 1, 1, 1, 2, 2, 0, 0, 3, 3, 3, 3])
    plan = planned(spec(4, 4), nodes)
    # The idle nodes, then the first unit that fits the room left (j1 and j3 need all four).
    assert plan.batches[0].nodes[:2] == ("gpu-006", "gpu-007")
    assert set(plan.batches[0].nodes[2:]) == {"gpu-004", "gpu-005"}
    for batches in starts_by_workload(plan, nodes).values():
        assert len(batches) == 1
    assert plan.phase.value == "Complete"


def test_a_batch_grows_to_hold_a_workload_within_the_cap() -> None:
    nodes = fleet([0, 1, 1, 1])
    plan = planned(spec(3, 1), nodes)
    assert [len(b.nodes) for b in plan.batches] == [1, 3]
    assert max_concurrent(plan) <= 3


def test_a_workload_larger_than_the_cap_goes_in_consecutive_batches_and_says_so() -> None:
    nodes = fleet([1] * 7 + [0])
    rollout = spec(3, 3)
    plan = planned(rollout, nodes)
    sizes = [len(b.nodes) for b in plan.batches]
    assert sizes == [1, 3, 3, 1]  # idle first, then the job's nodes in pieces of the cap
    first = decide(begin(rollout, T0), Observations(nodes=tuple(nodes)), T0)
    assert "workload Job/ml/j1 spans 7 nodes, more than maxUnavailable 3" in first.message
    assert "3 consecutive batches" in first.message


def test_workloads_sharing_a_node_start_together() -> None:
    nodes = [node(0, ("Job/a/x",)), node(1, ("Job/a/x", "Job/a/y")), node(2, ("Job/a/y",)), node(3)]
    plan = planned(spec(3, 3), nodes)
    batch_of = {p.node: p.batch for p in plan.nodes}
    assert batch_of["gpu-000"] == batch_of["gpu-001"] == batch_of["gpu-002"]


def test_a_unit_waits_for_room_for_all_its_nodes() -> None:
    # Two nodes of j1 and four of j2 under a cap of 4: j2 never starts beside j1.
    nodes = fleet([1, 1, 2, 2, 2, 2])
    plan = planned(spec(4, 8), nodes)
    assert max_concurrent(plan) <= 4
    start_of = {p.node: p.start for p in plan.nodes}
    assert len({start_of[n.name] for n in nodes[2:]}) == 1  # j2's four nodes start at once


def test_the_canary_prefers_an_idle_node_then_the_smallest_workload() -> None:
    nodes = fleet([1, 1, 2, 2, 0, 3, 3])
    first = decide(begin(spec(2, 2, canary=1), T0), Observations(nodes=tuple(nodes)), T0)
    assert [s.node for s in first.start] == ["gpu-004"]
    busy = fleet([1, 1, 2, 2, 4, 3, 3])
    first = decide(begin(spec(2, 2, canary=1), T0), Observations(nodes=tuple(busy)), T0)
    assert [s.node for s in first.start] == ["gpu-004"]
    # No idle node, no single-node job: the canary's extra interruption goes to the smallest
    # workload (j2, 4 nodes), not to the largest one the order puts first.
    packed = fleet([1, 1, 1, 1, 1, 1, 2, 2, 2, 2])
    first = decide(begin(spec(2, 2, canary=1), T0), Observations(nodes=tuple(packed)), T0)
    assert next(s.node for s in first.start) in {"gpu-006", "gpu-007", "gpu-008", "gpu-009"}


jobs_lists = st.lists(st.integers(0, 6), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    jobs=jobs_lists,
    cap=st.integers(1, 8),
    initial=st.integers(1, 8),
    kind=st.sampled_from(list(StrategyKind)),
    canary=st.sampled_from([0, 1, 2]),
)
def test_a_workload_that_fits_is_never_split_and_the_budget_holds(
    jobs: list[int], cap: int, initial: int, kind: StrategyKind, canary: int
) -> None:
    nodes = fleet(jobs)
    plan = planned(spec(cap, initial, kind, canary), nodes)
    assert plan.phase.value == "Complete"
    assert len(plan.nodes) == len(nodes)
    assert max_concurrent(plan) <= cap
    size: dict[int, int] = defaultdict(int)
    for j in jobs:
        size[j] += 1
    canaries = {p.node for p in plan.nodes if p.batch == 0}
    for workload, batches in starts_by_workload(plan, nodes).items():
        touched_by_canary = any(
            n.name in canaries for n in nodes if any(w.name == workload for w in n.workloads)
        )
        if size[int(workload.rsplit("j", 1)[1])] <= cap and not touched_by_canary:
            assert len(batches) == 1, (workload, batches)


@settings(max_examples=60, deadline=None)
@given(jobs=jobs_lists, cap=st.integers(1, 8), seed=st.randoms(use_true_random=False))
def test_the_order_is_stable_whatever_order_the_fleet_is_read_in(
    jobs: list[int], cap: int, seed: object
) -> None:
    nodes = [OrderInput(n.name, n.labels, tuple(w.name for w in n.workloads)) for n in fleet(jobs)]
    shuffled = list(nodes)
    seed.shuffle(shuffled)  # type: ignore[attr-defined]
    first = order_by_workloads(nodes, {"": cap})
    again = order_by_workloads(shuffled, {"": cap})
    assert first == again
    assert sorted(first.order) == sorted(n.name for n in nodes)
    idle = [n.name for n in nodes if not n.workloads]
    plain = order_nodes((m.name, m.labels) for m in nodes)
    assert first.order[: len(idle)] == [n for n in plain if n in idle]


def test_a_unit_never_spans_two_compartments() -> None:
    nodes = [
        n.model_copy(update={"labels": {**n.labels, "rack": "a" if i < 2 else "b"}})
        for i, n in enumerate(fleet([1, 1, 1, 1, 0, 0]))
    ]
    compartment = Compartment(name="rack-b", selector=Selector(match_labels={"rack": "b"}))
    rollout = spec(4, 4)
    rollout = rollout.model_copy(
        update={"policy": rollout.policy.model_copy(update={"compartments": (compartment,)})}
    )
    plan = planned(rollout, nodes)
    by_node = {p.node: (p.compartment, p.batch) for p in plan.nodes}
    assert by_node["gpu-000"] == by_node["gpu-001"]
    assert by_node["gpu-002"] == by_node["gpu-003"]
    assert by_node["gpu-000"][0] == "default"
    assert by_node["gpu-002"][0] == "rack-b"


def test_a_unit_the_budget_cannot_hold_whole_waits_with_the_reason() -> None:
    nodes = fleet([0, 1, 1, 1])
    # Someone else's cordon on an updated node holds one of the three slots.
    done = nodes[0].model_copy(
        update={"unschedulable": True, "packages": {"driver": PackageRecord(version="2.0.0")}}
    )
    decision = decide(begin(spec(3, 3), T0), Observations(nodes=(done, *nodes[1:])), T0)
    assert decision.start == ()
    held = {b.node: b.reason for b in (*decision.blocked, *decision.waiting)}
    assert set(held) == {"gpu-001", "gpu-002", "gpu-003"}
    assert held["gpu-001"].startswith(
        "Budget: the 3 nodes of one workload start together; 1 of maxUnavailable 3"
    )


# ----- workloadWait: hold a node while its workloads finish, bounded ------------------------------
def waiting_spec(timeout: int = 1800, cap: int = 2) -> RolloutSpec:
    rollout = spec(cap, cap)
    wait = WorkloadWait(selector=Selector(match_labels={"app": "train"}), timeout_seconds=timeout)
    return rollout.model_copy(update={"policy": rollout.policy.model_copy(update={"workload_wait": wait})})


def finishing(nodes: list[NodeObservation], name: str) -> list[NodeObservation]:
    return [n.model_copy(update={"finishing": ("ml/trainer-0",)}) if n.name == name else n for n in nodes]


def test_a_node_waits_for_its_workloads_without_holding_budget() -> None:
    first, *others = order_nodes((n.name, n.labels) for n in fleet([0, 0, 0]))
    nodes = finishing(fleet([0, 0, 0]), first)
    rollout = waiting_spec()
    decision = decide(begin(rollout, T0), Observations(nodes=tuple(nodes)), T0)
    assert sorted(s.node for s in decision.start) == sorted(others)  # both slots used
    (held,) = decision.waiting
    assert held.node == first
    assert held.reason == (
        "WaitingForWorkloads: ml/trainer-0 running; at most until " + (T0 + timedelta(minutes=30)).isoformat()
    )
    assert decision.state.held_for_workloads == {first: T0}
    assert decision.wake_at == T0 + timedelta(minutes=30)
    assert decision.watch_fleet  # the pods' end shows on a fresh observation
    # Without the policy's wait, the same observation starts the node.
    plain = decide(begin(spec(2, 2), T0), Observations(nodes=tuple(nodes)), T0)
    assert first in {s.node for s in plain.start}


def test_a_held_node_starts_once_its_workloads_finished_or_the_bound_passed() -> None:
    rollout = waiting_spec(timeout=600)
    nodes = finishing(fleet([0]), "gpu-000")
    first = decide(begin(rollout, T0), Observations(nodes=tuple(nodes)), T0)
    assert first.start == ()
    later = T0 + timedelta(minutes=4)
    still = decide(first.state, Observations(nodes=tuple(nodes)), later)
    assert still.start == ()
    assert still.state.held_for_workloads == {"gpu-000": T0}  # the bound counts from the first hold
    done = decide(still.state, Observations(nodes=tuple(fleet([0]))), later)
    assert [s.node for s in done.start] == ["gpu-000"]
    assert done.state.held_for_workloads == {}
    bound = decide(still.state, Observations(nodes=tuple(nodes)), T0 + timedelta(minutes=10))
    assert [s.node for s in bound.start] == ["gpu-000"]  # its drain evicts what still runs


def test_a_unit_waits_whole_when_one_of_its_nodes_waits() -> None:
    nodes = finishing(fleet([1, 1, 0]), "gpu-001")
    decision = decide(begin(waiting_spec(cap=3), T0), Observations(nodes=tuple(nodes)), T0)
    assert [s.node for s in decision.start] == ["gpu-002"]
    assert {b.node for b in decision.waiting} == {"gpu-000", "gpu-001"}


WAIT = {"selector": {"matchLabels": {"app": "train"}}, "timeoutSeconds": 600}
EVERY_STEP = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "soak", "soak": {"durationSeconds": 600}},
    {"name": "approval", "approval": {}},
    {"name": "rest", "batches": {"strategy": "exponential", "initial": 2}},
]


@pytest.mark.parametrize(
    ("shape", "reads"),
    [
        ({}, True),
        ({"steps": EVERY_STEP, "max_unavailable": "10%", "max_failed_nodes": 3}, True),
        ({"workload_order": False}, False),
        ({"workload_order": False, "steps": EVERY_STEP, "max_unavailable": "10%"}, False),
        ({"workload_order": False, "workload_label": "example.com/run"}, False),
        ({"workload_order": False, "workload_wait": WAIT}, True),
        ({"workload_label": "example.com/run", "workload_wait": WAIT, "steps": EVERY_STEP}, True),
    ],
)
def test_a_turn_reads_pods_for_the_workload_order_or_the_wait(shape: dict[str, Any], reads: bool) -> None:
    policy = convert.policy(examples.policy(**shape))
    assert policy.reads_pods() is reads


def test_compartments_and_windows_read_no_pods() -> None:
    policy = RolloutPolicy(
        workload_order=False,
        compartments=(Compartment(name="a", selector=Selector(match_labels={"zone": "a"})),),
        windows=(Window(cron="0 2 * * 6", duration_seconds=7200),),
    )
    assert not policy.reads_pods()
    wait = WorkloadWait(selector=Selector(), timeout_seconds=60)
    assert policy.model_copy(update={"workload_wait": wait}).reads_pods()


# ----- a unit waits, bounded, for its node that cannot start ---------------------------------------
def unit_of(nodes: list[NodeObservation], job: str) -> tuple[str, ...]:
    """The unit (in order) the workload-aware order makes of ``job``'s nodes."""
    inputs = [OrderInput(n.name, n.labels, tuple(w.name for w in n.workloads)) for n in nodes]
    units = order_by_workloads(inputs, {"": 4}).units
    return next(
        u for u in units.values() if any(job in w.name for n in nodes if n.name in u for w in n.workloads)
    )


def with_node(nodes: list[NodeObservation], name: str, **update: Any) -> list[NodeObservation]:
    return [n.model_copy(update=update) if n.name == name else n for n in nodes]


UNIT_BOUND = T0 + timedelta(minutes=30)


@pytest.mark.parametrize(
    ("update", "why"),
    [
        ({"ready": False}, "NotReady: the node is not Ready"),
        ({"disruptions": ("profile/other",)}, "Busy: profile/other"),
        ({"waiting_on": ("firmware",)}, "WaitingFor: earlier profiles firmware"),
    ],
)
def test_a_unit_waits_for_its_node_that_cannot_start(update: dict[str, Any], why: str) -> None:
    nodes = fleet([1, 1, 1, 0])
    unit = unit_of(nodes, "j1")
    missing = unit[1]
    decision = decide(
        begin(spec(4, 4), T0), Observations(nodes=tuple(with_node(nodes, missing, **update))), T0
    )
    assert [s.node for s in decision.start] == ["gpu-003"]  # the idle node only
    waiting = {b.node: b.reason for b in decision.waiting}
    assert set(waiting) == set(unit) - {missing}
    assert set(waiting.values()) == {
        f"WaitingForUnit: {missing} of its workload cannot start ({why}); "
        f"at most until {UNIT_BOUND.isoformat()}"
    }
    assert {b.node: b.reason for b in decision.blocked}[missing] == why
    assert decision.state.unit_waits == {unit[0]: T0}
    assert decision.wake_at == UNIT_BOUND
    assert decision.watch_fleet  # the node's return shows on a fresh observation


def test_a_waiting_unit_starts_whole_once_its_node_is_back() -> None:
    nodes = fleet([1, 1, 1, 0])
    unit = unit_of(nodes, "j1")
    down = with_node(nodes, unit[2], ready=False)
    first = decide(begin(spec(4, 4), T0), Observations(nodes=tuple(down)), T0)
    later = T0 + timedelta(minutes=10)
    still = decide(first.state, Observations(nodes=tuple(down)), later)
    assert {s.node for s in still.start} == set()
    assert still.state.unit_waits == {unit[0]: T0}  # the bound counts from the first wait
    back = decide(still.state, Observations(nodes=tuple(nodes)), later)
    assert {s.node for s in back.start} == set(unit)
    assert len({s.batch for s in back.start}) == 1
    assert back.state.unit_waits == {}


def test_after_the_bound_a_unit_starts_without_its_node_and_says_so() -> None:
    nodes = fleet([1, 1, 1, 0])
    unit = unit_of(nodes, "j1")
    down = tuple(with_node(nodes, unit[1], ready=False))
    first = decide(begin(spec(4, 4), T0), Observations(nodes=down), T0)
    bound = decide(first.state, Observations(nodes=down), UNIT_BOUND)
    assert {s.node for s in bound.start} == set(unit) - {unit[1]}
    assert f"the workload unit of {unit[0]} starts without {unit[1]} after waiting 30m" in bound.message
    assert {b.node for b in bound.blocked} == {unit[1]}
    # Said once: with the rest started, the node left behind only waits as a NotReady node.
    after = decide(bound.state, Observations(nodes=down), UNIT_BOUND + timedelta(minutes=1))
    assert "starts without" not in after.message


def test_a_unit_waits_for_its_node_still_running_an_earlier_target() -> None:
    nodes = fleet([1, 1, 0])
    unit = unit_of(nodes, "j1")
    state = begin(spec(4, 4), T0).model_copy(update={"running_for_earlier_target": (unit[0],)})
    busy = with_node(nodes, unit[0], run=RunStatus.RUNNING)
    decision = decide(state, Observations(nodes=tuple(busy)), T0)
    assert [s.node for s in decision.start] == ["gpu-002"]
    (waiting,) = decision.waiting
    assert waiting.node == unit[1]
    assert waiting.reason.startswith(
        f"WaitingForUnit: {unit[0]} of its workload cannot start (Busy: finishing"
    )
