"""What one chaos iteration does, drawn from the seed: the fleet size, the policy, the package's
interrupt, the stage outcome the simulated fleet produces, and the faults with their moments.

Pure: the same (seed, iteration) always gives the same plan, so a printed seed reproduces a run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Fault(StrEnum):
    KILL_WORKER = "kill-worker"
    KILL_CONTROLLER = "kill-controller"
    KILL_TEMPORAL = "kill-temporal"
    KILL_APISERVER = "kill-apiserver"
    TEMPORAL_UNREACHABLE = "temporal-unreachable"
    FOREIGN_CORDON = "foreign-cordon"
    FOREIGN_LABEL = "foreign-label"
    FOREIGN_TAINT = "foreign-taint"
    DELETE_NODE = "delete-node"
    MALFORMED_ANNOTATION = "malformed-annotation"
    TERMINATE_NODE_WORKFLOW = "terminate-node-workflow"
    """A running node workflow terminated, as from the Temporal UI: it never reports."""


# Faults that stop a process the engine needs: the visibility clock does not run while they last.
OUTAGES = frozenset(
    {
        Fault.KILL_WORKER,
        Fault.KILL_CONTROLLER,
        Fault.KILL_TEMPORAL,
        Fault.KILL_APISERVER,
        Fault.TEMPORAL_UNREACHABLE,
    }
)


class Outcome(StrEnum):
    """What every stage pod of the iteration does on the simulated fleet."""

    SUCCEED = "succeed"
    FAIL = "fail"  # each stage Job fails ``stage_failures`` times (its whole backoff budget)
    IMAGE_PULL = "image-pull-backoff"  # the package image never pulls


@dataclass(frozen=True)
class Injection:
    fault: Fault
    at: float
    """Seconds after the profile is applied."""
    pause: float = 0.0
    """How long a killed process stays down (an unreachable server stays unreachable)."""
    after_jobs: int = 0
    """Also wait until the rollout has created this many stage Jobs: a fault that must land
    mid-rollout (stages done behind it, more to run) whatever the machine's pace."""
    after_phase: str = ""
    """Also wait until the NodeProfile shows this phase (``RollingBack``: a fault that must land
    mid-rollback)."""


@dataclass(frozen=True)
class IterationPlan:
    seed: int
    index: int
    nodes: int
    max_unavailable: int
    steps: tuple[dict[str, Any], ...]
    max_failed_nodes: int
    interrupt: str | None
    outcome: Outcome
    stage_failures: int
    injections: tuple[Injection, ...] = field(default=())
    rollback: bool = False
    """The iteration installs ``tuning`` 1.0.0 first, then applies 1.1.0, whose ``config`` stage
    fails on every node, under ``failure.action: rollback``: the rollout rolls back, and the
    injections land counted from the second apply."""


def _steps(rng: random.Random, nodes: int) -> tuple[dict[str, Any], ...]:
    strategy = rng.choice(["fixed", "linear", "exponential"])
    batches: dict[str, Any] = {"strategy": strategy, "initial": rng.randint(1, max(1, nodes // 2))}
    steps: list[dict[str, Any]] = [{"name": "canary", "canary": {"count": 1}}]
    if rng.random() < 0.5:
        steps.append({"name": "watch", "soak": {"durationSeconds": rng.randint(1, 3)}})
    steps.append({"name": "rest", "batches": batches})
    return tuple(steps)


def draw(
    seed: int,
    index: int,
    *,
    outage_seconds: float = 60.0,
    window_seconds: float = 25.0,
    faults: tuple[Fault, ...] = tuple(Fault),
) -> IterationPlan:
    """The plan of iteration ``index`` of a run seeded ``seed``; faults land within ``window_seconds``
    of the apply (where a small rollout does its work); ``outage_seconds`` is how long Temporal
    stays unreachable."""
    rng = random.Random(f"{seed}/{index}")  # noqa: S311 - reproducible draws, not secrets
    nodes = rng.randint(3, 6)
    roll = rng.random()
    outcome = Outcome.SUCCEED if roll < 0.7 else (Outcome.FAIL if roll < 0.85 else Outcome.IMAGE_PULL)
    injections = []
    for _ in range(rng.randint(1, 3)):
        fault = rng.choice(faults)
        pause = outage_seconds if fault is Fault.TEMPORAL_UNREACHABLE else round(rng.uniform(0.0, 5.0), 1)
        injections.append(Injection(fault, round(rng.uniform(0.0, window_seconds), 1), pause))
    return IterationPlan(
        seed=seed,
        index=index,
        nodes=nodes,
        max_unavailable=rng.randint(1, min(3, nodes)),
        steps=_steps(rng, nodes),
        max_failed_nodes=rng.choice([0, 0, 1]),
        interrupt=rng.choice(["reboot", "reboot", None]),
        outcome=outcome,
        stage_failures=rng.randint(1, 3),
        injections=tuple(sorted(injections, key=lambda i: i.at)),
    )


def rollback_plan(seed: int, index: int, *, pause: float = 3.0) -> IterationPlan:
    """A rollback iteration whose worker is killed once the rollout shows ``RollingBack`` (with a
    reboot interrupt, so the kill can land in a drain, a stage or a reboot of the return)."""
    rng = random.Random(f"{seed}/{index}/rollback")  # noqa: S311 - reproducible draws, not secrets
    nodes = rng.randint(3, 5)
    return IterationPlan(
        seed=seed,
        index=index,
        nodes=nodes,
        max_unavailable=rng.randint(1, 2),
        steps=({"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},),
        max_failed_nodes=0,
        interrupt="reboot",
        outcome=Outcome.SUCCEED,
        stage_failures=1,
        injections=(Injection(Fault.KILL_WORKER, 0.0, pause, after_phase="RollingBack"),),
        rollback=True,
    )
