"""The planner's view of a DeploymentPolicy: the cap, the steps, failure rules, windows and
compartments, normalised (defaults resolved) into the shape the rollout engine needs.
``convert`` builds it from the API models.

How the steps apply (the rollout as a whole: docs/architecture.md):
- the policy's steps before ``batches`` (canary, soak, approval) are *rollout gates*: they run once,
  over all targeted nodes, before any compartment starts; so a failed canary stops the rollout
  before any other node is touched.
- then every compartment runs its own steps (``Compartment.steps``), or, when it has none, the
  policy's ``batches`` step. Nodes matching no compartment form the ``default`` compartment.
- ``maxUnavailable`` caps the whole profile; a compartment's own cap caps it in addition.

Owns only data and its validation; must not decide anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from fleetwright.api.compat import added_fields
from fleetwright.api.health import MetricCheck
from fleetwright.planner.base import Frozen
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.policy.windows import Window


class StrategyKind(StrEnum):
    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


class Strategy(Frozen):
    """A batches step's batch sizing (``rollout.sizing`` computes the sizes)."""

    kind: StrategyKind = StrategyKind.FIXED
    initial_batch: int = Field(default=1, ge=1)
    delta: int = Field(default=1, ge=1)
    growth_factor: int = Field(default=2, ge=2)
    batch_threshold: int = Field(default=100, ge=1, le=100)
    failure_threshold: int | None = Field(default=None, ge=1)
    safety_limit: int = Field(default=50, ge=0, le=100)
    max_batch_size: int | None = Field(default=None, ge=1)


class Budget(Frozen):
    """A node count or a percentage of the nodes it applies to (rounded down, but at least one node
    while any exist, so a percentage never freezes a small fleet)."""

    count: int | None = Field(default=None, ge=0)
    percent: int | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        if (self.count is None) == (self.percent is None):
            raise ValueError("exactly one of count or percent must be set")
        return self

    def resolve(self, total: int) -> int:
        if total <= 0:
            return 0
        if self.count is not None:
            return min(self.count, total)
        percent = self.percent or 0
        return max(1, total * percent // 100) if percent > 0 else 0

    def describe(self) -> str:
        return f"{self.count}" if self.count is not None else f"{self.percent}%"


class CanaryStep(Frozen):
    kind: Literal["canary"] = "canary"
    name: str = "canary"
    count: int | None = Field(default=None, ge=1)
    selector: Selector | None = None

    @model_validator(mode="after")
    def _count_or_selector(self) -> CanaryStep:
        if (self.count is None) == (self.selector is None):
            raise ValueError("a canary needs exactly one of count or selector")
        return self


class HealthGate(Frozen):
    """What must hold on every node updated so far, throughout a soak."""

    node_ready: bool = True
    conditions: dict[str, str] = Field(default_factory=dict)
    """Node condition type -> required status ("True", "False", "Unknown")."""


class SoakStep(Frozen):
    kind: Literal["soak"] = "soak"
    name: str = "soak"
    duration_seconds: int = Field(ge=0)
    health_gate: HealthGate | None = HealthGate()
    checks: tuple[MetricCheck, ...] = ()
    """The fleet gate: metric checks measured while the soak lasts (``planner.rollout.fleetgate``)."""
    _since_0_1_0 = added_fields("checks")


class ApprovalStep(Frozen):
    kind: Literal["approval"] = "approval"
    name: str = "approval"
    timeout_seconds: int | None = Field(default=None, gt=0)


class BatchesStep(Frozen):
    kind: Literal["batches"] = "batches"
    name: str = "batches"
    strategy: Strategy = Strategy()
    pause_seconds: int = Field(default=0, ge=0)
    """Wait between one batch's end and the next batch's start."""
    reset_batch_size: bool = True
    """False: the next rollout of the profile sizes its first batch from the last batch this one
    ran (growing it as after a passed batch), not from ``initial``."""
    checks: tuple[MetricCheck, ...] = ()
    """The fleet gate in the background: metric checks measured while the batches run, in runs of
    ``count`` one after the other (``planner.rollout.fleetgate``); no batch starts while one is not
    passing."""
    _since_0_1_0 = added_fields("checks")


Step = Annotated[CanaryStep | SoakStep | ApprovalStep | BatchesStep, Field(discriminator="kind")]


class FailureAction(StrEnum):
    HALT = "halt"
    ROLLBACK = "rollback"


class FailurePolicy(Frozen):
    max_failed_nodes: int | None = Field(default=0, ge=0)
    """Fire ``action`` once more than this many nodes failed (None: never on node count)."""
    action: FailureAction = FailureAction.HALT


class WorkloadWait(Frozen):
    """Hold a node whose observation lists pods to wait for (``NodeObservation.finishing``, the
    pods ``selector`` matches) until they finish or ``timeout_seconds`` passed since it was first
    held; then it starts."""

    selector: Selector
    timeout_seconds: int = Field(ge=1)


class Compartment(Frozen):
    """A group of nodes with its own budget, steps and failure rules."""

    name: str
    selector: Selector
    max_unavailable: Budget | None = None
    steps: tuple[Step, ...] = ()
    failure: FailurePolicy | None = None


DEFAULT_COMPARTMENT = "default"
GATES_SCOPE = "rollout"


class RolloutPolicy(Frozen):
    max_unavailable: Budget = Budget(count=1)
    steps: tuple[Step, ...] = ()
    failure: FailurePolicy = FailurePolicy()
    windows: tuple[Window, ...] = ()
    compartments: tuple[Compartment, ...] = ()
    spread_key: str = "topology.kubernetes.io/zone"
    workload_label: str | None = None
    """A pod label key whose value names a workload (with the pod's namespace), besides the owners
    ``kube.workloads`` recognises; read by whoever observes the pods."""
    workload_wait: WorkloadWait | None = None
    workload_order: bool = True
    """Order nodes by their workloads (``planner.rollout.ordering``); False: zones round-robin."""
    node_gate: bool = False
    """The policy has a node gate: a node whose stages are done counts updated only once it passed
    its gate (``Counts.unproven`` until then); the workflows run the gate itself."""
    preflight: bool = False
    """Nodes run their packages' checks in service before they are cordoned (``planner.node.preflight``):
    one whose checks pass is recorded at the target and spared the cordon."""
    _since_0_1_0 = added_fields("workload_label", "workload_wait", "workload_order", "node_gate", "preflight")

    def reads_pods(self) -> bool:
        """Whether a rollout turn reads the pods bound to nodes: the one rule for it. The
        workload-aware order (on unless ``workload_order`` is False) and ``workload_wait`` use
        them; steps, gates, compartments and windows read only Nodes, and drains list their own
        node's pods."""
        return self.workload_order or self.workload_wait is not None

    @model_validator(mode="after")
    def _unique_names(self) -> RolloutPolicy:
        names = [c.name for c in self.compartments]
        if len(set(names)) != len(names) or {DEFAULT_COMPARTMENT, GATES_SCOPE} & set(names):
            raise ValueError(
                f"compartment names must be unique and not {DEFAULT_COMPARTMENT!r} or {GATES_SCOPE!r}"
            )
        return self

    def gate_steps(self) -> tuple[Step, ...]:
        """The rollout-wide gates: every policy step that is not ``batches``."""
        return tuple(step for step in self.steps if not isinstance(step, BatchesStep))

    def batches_step(self) -> BatchesStep:
        found = [step for step in self.steps if isinstance(step, BatchesStep)]
        return found[0] if found else BatchesStep()

    def compartment_steps(self, name: str) -> tuple[Step, ...]:
        for compartment in self.compartments:
            if compartment.name == name and compartment.steps:
                return compartment.steps
        return (self.batches_step(),)

    def approval_ids(self, compartments: Iterable[str] = ()) -> list[str]:
        """``<scope>/<step>`` of every approval step a human may approve: the rollout-wide gates',
        then each compartment's (the policy's own and ``compartments``, the rollout's)."""
        ids = [f"{GATES_SCOPE}/{s.name}" for s in self.gate_steps() if _approvable(s)]
        for name in sorted({c.name for c in self.compartments} | set(compartments)):
            ids += [f"{name}/{s.name}" for s in self.compartment_steps(name) if _approvable(s)]
        return sorted(set(ids))

    def without_background_checks(self) -> RolloutPolicy:
        """The policy with its batches steps' fleet-gate checks removed (a rollback's, a preview's)."""
        compartments = tuple(
            c.model_copy(update={"steps": tuple(_unchecked(s) for s in c.steps)}) for c in self.compartments
        )
        steps = tuple(_unchecked(s) for s in self.steps)
        return self.model_copy(update={"steps": steps, "compartments": compartments})

    def compartment(self, name: str) -> Compartment | None:
        return next((c for c in self.compartments if c.name == name), None)

    def failure_for(self, name: str) -> FailurePolicy:
        compartment = self.compartment(name)
        if compartment is not None and compartment.failure is not None:
            return compartment.failure
        return self.failure


def _approvable(step: Step) -> bool:
    """An approval step, or a soak or batches step whose fleet gate a human passes when it is
    Inconclusive."""
    return isinstance(step, ApprovalStep) or (isinstance(step, SoakStep | BatchesStep) and bool(step.checks))


def _unchecked(step: Step) -> Step:
    if isinstance(step, BatchesStep) and step.checks:
        return step.model_copy(update={"checks": ()})
    return step
