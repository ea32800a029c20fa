"""Batch sizing and evaluation against NodeWright's definitions and documented examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwright.planner.policy.model import Strategy, StrategyKind
from fleetwright.planner.rollout.sizing import (
    BatchState,
    evaluate_batch,
    next_batch_size,
    progress_percent,
    record_nodes,
)

pytestmark = pytest.mark.unit

EXP = StrategyKind.EXPONENTIAL
LIN = StrategyKind.LINEAR


def run(strategy: Strategy, total: int, outcomes: list[float]) -> tuple[list[int], BatchState]:
    """Sizes of successive batches when each batch succeeds on the given fraction of its nodes."""
    state = BatchState()
    sizes = []
    for fraction in outcomes:
        size = next_batch_size(strategy, state, total)
        if size == 0:
            break
        sizes.append(size)
        ok = int(size * fraction)
        state = record_nodes(state, succeeded=ok, failed=size - ok)
        state = evaluate_batch(strategy, state, size=size, succeeded=ok, total=total)
    return sizes, state


def test_exponential_doubles_from_the_initial_batch() -> None:
    sizes, _ = run(Strategy(kind=EXP, initial_batch=1, growth_factor=2), 1000, [1.0] * 20)
    # 1+2+...+256 = 511 nodes, then 489 remain: the last batch is capped by what is left.
    assert sizes == [1, 2, 4, 8, 16, 32, 64, 128, 256, 489]


def test_linear_grows_by_delta() -> None:
    sizes, _ = run(Strategy(kind=LIN, initial_batch=2, delta=3), 100, [1.0] * 6)
    assert sizes == [2, 5, 8, 11, 14, 17]


def test_fixed_never_changes() -> None:
    sizes, _ = run(Strategy(initial_batch=3), 10, [1.0, 0.0, 1.0, 1.0])
    assert sizes == [3, 3, 3, 1]


def test_a_failed_batch_shrinks_the_next_one_below_the_safety_limit() -> None:
    exp, _ = run(Strategy(kind=EXP, growth_factor=2), 1000, [1, 1, 1, 0, 1, 1])
    assert exp == [1, 2, 4, 8, 4, 8]  # the batch of 8 failed: 8 // 2 = 4, then growth resumes
    lin, _ = run(Strategy(kind=LIN, delta=1), 1000, [1, 1, 0, 0, 0, 1])
    assert lin == [1, 2, 3, 2, 1, 1]  # never below one


def test_past_the_safety_limit_a_failure_neither_shrinks_nor_stops() -> None:
    strategy = Strategy(kind=EXP, growth_factor=2, safety_limit=50, failure_threshold=1)
    # 10 nodes: 1 + 2 + 4 = 7 processed = 70% > 50%, so the failed third batch grows the next one.
    sizes, state = run(strategy, 10, [1, 1, 0, 0])
    assert sizes == [1, 2, 4, 3]
    assert not state.should_stop
    assert state.consecutive_failures == 2


def test_failure_threshold_counts_consecutive_failed_batches_below_the_safety_limit() -> None:
    strategy = Strategy(kind=LIN, failure_threshold=2)
    _, one = run(strategy, 100, [1, 0])
    assert not one.should_stop
    _, reset = run(strategy, 100, [0, 1, 0])
    assert not reset.should_stop  # a passing batch resets the count
    _, two = run(strategy, 100, [1, 0, 0])
    assert two.should_stop


def test_no_failure_threshold_never_stops() -> None:
    _, state = run(Strategy(kind=EXP), 100, [0.0] * 10)
    assert not state.should_stop


@pytest.mark.parametrize(("succeeded", "failed_batch"), [(4, False), (3, True)])
def test_batch_threshold_is_an_integer_percentage_of_the_batch(succeeded: int, failed_batch: bool) -> None:
    strategy = Strategy(kind=EXP, batch_threshold=80)
    state = record_nodes(BatchState(), succeeded=succeeded, failed=5 - succeeded)
    assert evaluate_batch(strategy, state, size=5, succeeded=succeeded, total=100).last_failed is failed_batch


def test_max_batch_size_caps_growth() -> None:
    sizes, _ = run(Strategy(kind=EXP, max_batch_size=5), 100, [1.0] * 5)
    assert sizes == [1, 2, 4, 5, 5]


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from([LIN, EXP]),
    initial=st.integers(1, 10),
    step=st.integers(2, 4),
    total=st.integers(1, 400),
    safety=st.integers(0, 100),
    outcomes=st.lists(st.floats(0, 1), min_size=1, max_size=25),
)
def test_growth_matches_its_definition(
    kind: StrategyKind, initial: int, step: int, total: int, safety: int, outcomes: list[float]
) -> None:
    strategy = Strategy(kind=kind, initial_batch=initial, delta=step, growth_factor=step, safety_limit=safety)
    state = BatchState()
    for fraction in outcomes:
        size = next_batch_size(strategy, state, total)
        remaining = total - state.processed
        if remaining == 0:
            assert size == 0
            break
        if state.last_size == 0:
            expected = initial
        else:
            shrink = state.last_failed and progress_percent(state.processed, total) < safety
            if kind is LIN:
                expected = max(1, state.last_size - step) if shrink else state.last_size + step
            else:
                expected = max(1, state.last_size // step) if shrink else state.last_size * step
        assert size == max(1, min(expected, remaining))
        ok = int(size * fraction)
        state = record_nodes(state, succeeded=ok, failed=size - ok)
        state = evaluate_batch(strategy, state, size=size, succeeded=ok, total=total)
        assert state.processed <= total
