"""The preflight: which checks a node runs in service, before its cordon, to learn whether it
already carries the target (``DeploymentPolicy.spec.preflight``).

Each stage of the node's work but an interrupt has a check mode (``apply-check``,
``config-check``, ...); the preflight runs those checks, in the work's order, without their work
modes. A node whose every check passes is recorded as if its stages had run and is never cordoned;
any other outcome (a check fails, a Job cannot start) leaves the node to the normal path. Pure:
what to run and what to say, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetwright.planner.node.work import NodeStep, NodeWork

SPARED = "already carries the target: its checks passed in service (preflight), never cordoned"


def preflight_steps(work: NodeWork) -> tuple[NodeStep, ...]:
    """The steps whose checks the preflight runs: every step of ``work`` that has a check (an
    interrupt has none; ``post-interrupt-check`` tells whether the interrupt's effect is there)."""
    return tuple(step for step in work.steps if step.check is not None)


def runs_preflight(work: NodeWork, *, enabled: bool, regate: bool = False) -> bool:
    """Whether a node with ``work`` runs a preflight: the policy asks for it, the node has checks
    to run, and it is not a node whose health gate failed before (it must pass the gate again)."""
    return enabled and not regate and bool(preflight_steps(work))


def preflight_count(works: Iterable[NodeWork], *, enabled: bool) -> int:
    """How many of the nodes with ``works`` will run a preflight (its outcome is not known before)."""
    return sum(1 for work in works if runs_preflight(work, enabled=enabled))


def normal_path(failure: str) -> str:
    """The status message of a node whose preflight did not pass: it takes the normal path."""
    return f"preflight did not pass ({failure}); cordoning and updating"
