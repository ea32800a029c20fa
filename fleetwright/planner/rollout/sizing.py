"""Batch sizing and batch evaluation: NodeWright's fixed / linear / exponential strategies with
``initialBatch``, ``delta``, ``growthFactor``, ``batchThreshold``, ``failureThreshold`` and
``safetyLimit``, with the same integer arithmetic.

- fixed: every batch is ``initialBatch``.
- linear: ``initialBatch``, then the last size ``+ delta`` after a batch that passed, ``- delta``
  (at least 1) after one that failed.
- exponential: ``initialBatch``, then ``x growthFactor`` after a pass, ``// growthFactor`` (at least
  1) after a failure.
- a batch passes when ``successes * 100 // size >= batchThreshold``.
- ``safetyLimit``: once ``processed * 100 // total`` reaches it, a failed batch neither shrinks the
  next one nor counts towards stopping (the next size grows as after a pass).
- ``failureThreshold`` consecutive failed batches (below the safety limit) stop the compartment;
  ``None`` never stops.
- every size is capped by the nodes still to process, and is at least 1 while any remain.

The ``maxUnavailable`` cap is *not* applied here: it limits how many nodes of a batch run at once
(``budget``), so a strategy can never bypass it (NodeWright ignores its budget once a strategy is
set; fleetwright does not). The strategy itself is the policy's (``policy.model.Strategy``). Must
not look at nodes or time.
"""

from __future__ import annotations

from fleetwright.planner.base import Frozen
from fleetwright.planner.policy.model import Strategy, StrategyKind


class BatchState(Frozen):
    """One compartment's batch history (NodeWright's ``BatchProcessingState``)."""

    batches: int = 0
    """Batches evaluated so far."""
    last_size: int = 0
    last_failed: bool = False
    consecutive_failures: int = 0
    completed: int = 0
    failed: int = 0
    should_stop: bool = False

    @property
    def processed(self) -> int:
        return self.completed + self.failed


def progress_percent(processed: int, total: int) -> int:
    return processed * 100 // total if total > 0 else 0


def next_batch_size(strategy: Strategy, state: BatchState, total: int) -> int:
    """The size of the next batch out of ``total`` nodes (processed ones included); 0 when none
    remain."""
    remaining = total - state.processed
    if remaining <= 0:
        return 0
    size = strategy.initial_batch
    if state.last_size > 0 and strategy.kind is not StrategyKind.FIXED:
        slow_down = state.last_failed and progress_percent(state.processed, total) < strategy.safety_limit
        size = _shrink(strategy, state.last_size) if slow_down else _grow(strategy, state.last_size)
    if strategy.max_batch_size is not None:
        size = min(size, strategy.max_batch_size)
    return max(1, min(size, remaining))


def _grow(strategy: Strategy, size: int) -> int:
    if strategy.kind is StrategyKind.LINEAR:
        return size + strategy.delta
    return size * strategy.growth_factor


def _shrink(strategy: Strategy, size: int) -> int:
    if strategy.kind is StrategyKind.LINEAR:
        return max(1, size - strategy.delta)
    return max(1, size // strategy.growth_factor)


def record_nodes(state: BatchState, *, succeeded: int = 0, failed: int = 0) -> BatchState:
    """Count finished nodes (of a batch or of the canary) toward the compartment's progress."""
    return state.model_copy(
        update={"completed": state.completed + succeeded, "failed": state.failed + failed}
    )


def evaluate_batch(
    strategy: Strategy, state: BatchState, *, size: int, succeeded: int, total: int
) -> BatchState:
    """Fold one finished batch into the state. Its nodes must already be counted with
    ``record_nodes`` (progress includes them, as NodeWright computes it)."""
    if size <= 0:
        return state
    failed_batch = succeeded * 100 // size < strategy.batch_threshold
    consecutive = state.consecutive_failures + 1 if failed_batch else 0
    stop = state.should_stop
    if failed_batch and progress_percent(state.processed, total) < strategy.safety_limit:
        threshold = strategy.failure_threshold
        stop = stop or (threshold is not None and consecutive >= threshold)
    return state.model_copy(
        update={
            "batches": state.batches + 1,
            "last_size": size,
            "last_failed": failed_batch,
            "consecutive_failures": consecutive,
            "should_stop": stop,
        }
    )
