"""Chaos iteration plans with nothing drawn, for integration tests that run one fixed rollout on
the chaos stack: a package that reboots its node and succeeds after one failed, retried stage."""

from __future__ import annotations

from typing import Any

from fleetwright.chaos.iteration import Injection, IterationPlan, Outcome


def rebooting_plan(
    seed: int, index: int, nodes: int, steps: tuple[dict[str, Any], ...], *injections: Injection
) -> IterationPlan:
    """Iteration ``index`` over ``nodes`` nodes, at most two unavailable and no failed node allowed,
    under ``steps``, with ``injections``."""
    return IterationPlan(
        seed=seed,
        index=index,
        nodes=nodes,
        max_unavailable=2,
        steps=steps,
        max_failed_nodes=0,
        interrupt="reboot",
        outcome=Outcome.SUCCEED,
        stage_failures=1,
        injections=injections,
    )
