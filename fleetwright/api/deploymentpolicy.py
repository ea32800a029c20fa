"""The DeploymentPolicy resource (short name ``dp``): how fast and how safely changes roll out.

Owns the policy schema (the hard ``maxUnavailable`` cap, the ordered steps with the batches step,
failure rules, compartments) and its single-object rules (mirrored as CEL in the CRD). Its parts
live beside it: the gate steps (``gatesteps``), maintenance windows (``windows``), the workload
wait (``workloadwait``), image signatures (``imagesignatures``) and the health checks (``health``).
Turning a policy into batches is the planner's job. Must not do I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from fleetwright.api.common import (
    DNS_LABEL_PATTERN,
    LABEL_KEY_PATTERN,
    MAX_NAME,
    MAX_SHORT_STRING,
    ApiModel,
    IntOrPercent,
    LabelSelector,
    LocalRule,
    ObjectMeta,
    selector_required,
)
from fleetwright.api.compat import added_fields
from fleetwright.api.conditions import Condition
from fleetwright.api.gatesteps import ApprovalStep, CanaryStep, SoakStep
from fleetwright.api.health import MAX_CHECKS, CheckName, MetricCheck, NodeGate, ResolvedGate
from fleetwright.api.imagesignatures import ImageSignatures
from fleetwright.api.windows import MAX_WINDOWS, MaintenanceWindow
from fleetwright.api.workloadwait import WorkloadWait

KIND = "DeploymentPolicy"
PLURAL = "deploymentpolicies"
BUILTIN_POLICY_NAME = "builtin-default"
MAX_STEPS = 16
MAX_COMPARTMENTS = 32


BatchStrategy = Literal["fixed", "linear", "exponential"]


class BatchesStep(ApiModel):
    """Update all remaining nodes in batches (NodeWright strategies). Must be the last step; batch sizes
    are always capped by maxUnavailable."""

    strategy: BatchStrategy = Field(
        default="fixed",
        description="fixed: every batch has `initial` nodes; linear: +delta after a successful batch, -delta "
        "after a failed one; exponential: x growthFactor after success, / growthFactor after failure.",
    )
    initial: int = Field(
        default=1, description="Size of the first batch (NodeWright initialBatch).", ge=1, le=10000
    )
    delta: int | None = Field(
        default=None,
        description="linear only: nodes added or removed per batch (default 1).",
        ge=1,
        le=10000,
    )
    growth_factor: int | None = Field(
        default=None,
        description="exponential only: factor applied per batch (default 2).",
        ge=2,
        le=100,
    )
    max_batch_size: int | None = Field(
        default=None,
        description="Upper bound on a batch's size (besides maxUnavailable, which always caps).",
        ge=1,
        le=100000,
    )
    batch_threshold: int = Field(
        default=100,
        description="Percent of a batch's nodes that must complete for the batch to count as successful.",
        ge=1,
        le=100,
    )
    safety_limit: int = Field(
        default=50,
        description="Percent of progress after which failed batches neither shrink the batch size nor count "
        "toward failure.failureThreshold.",
        ge=0,
        le=100,
    )
    soak_seconds: int = Field(default=0, description="Pause between batches.", ge=0, le=7 * 86400)
    reset_batch_state_on_completion: bool = Field(
        default=True,
        description="Each new rollout of a profile (a new spec) starts its batches from `initial`. "
        "false: it starts from the size of the last batch the profile's previous rollout ran, grown as "
        "after a passed batch (a fleet that took the last change well takes the next one faster).",
    )
    checks: list[CheckName] = Field(
        default_factory=list,
        description="Fleet gate in the background: names of spec.healthChecks measured while the batches "
        "run, over the nodes updated so far ({{nodes}}; nothing is measured before one is), "
        "initialDelaySeconds after the step begins, then intervalSeconds after each measurement, in "
        "runs of `count` one after the other (the limits apply per run). No new batch starts while a "
        "check is Failed (the failure rule fires at once), Inconclusive (it waits for "
        "`fleetwright approve <scope>/<step>`) or MonitoringUnavailable (Prometheus does not "
        "answer: it waits for an answer, or that approval); running nodes finish.",
        max_length=MAX_CHECKS,
    )
    _since_0_1_0 = added_fields("checks")

    local_rules = (
        LocalRule(
            name="batches-delta-only-linear",
            cel="!has(self.delta) || (has(self.strategy) && self.strategy == 'linear')",
            message="delta is only allowed with strategy linear",
            field_path=".delta",
            reason="FieldValueForbidden",
            check=lambda m: m.delta is None or m.strategy == "linear",
        ),
        LocalRule(
            name="batches-growthfactor-only-exponential",
            cel="!has(self.growthFactor) || (has(self.strategy) && self.strategy == 'exponential')",
            message="growthFactor is only allowed with strategy exponential",
            field_path=".growthFactor",
            reason="FieldValueForbidden",
            check=lambda m: m.growth_factor is None or m.strategy == "exponential",
        ),
        LocalRule(
            name="batches-max-at-least-initial",
            cel="!has(self.maxBatchSize) || self.maxBatchSize >= (has(self.initial) ? self.initial : 1)",
            message="maxBatchSize must be >= initial",
            field_path=".maxBatchSize",
            check=lambda m: m.max_batch_size is None or m.max_batch_size >= m.initial,
        ),
    )

    def effective_delta(self) -> int:
        return self.delta if self.delta is not None else 1

    def effective_growth_factor(self) -> int:
        return self.growth_factor if self.growth_factor is not None else 2


StepKind = Literal["canary", "soak", "approval", "batches"]


class Step(ApiModel):
    """One step of a rollout; exactly one of canary, soak, approval, batches."""

    name: str | None = Field(
        default=None,
        description="Optional name shown in status and the Temporal UI.",
        max_length=MAX_SHORT_STRING,
        pattern=DNS_LABEL_PATTERN,
    )
    canary: CanaryStep | None = Field(default=None, description="Update a canary set of nodes.")
    soak: SoakStep | None = Field(default=None, description="Wait and watch.")
    approval: ApprovalStep | None = Field(default=None, description="Wait for a human approval.")
    batches: BatchesStep | None = Field(default=None, description="Update all remaining nodes in batches.")

    local_rules = (
        LocalRule(
            name="step-exactly-one-kind",
            cel="[has(self.canary), has(self.soak), has(self.approval), has(self.batches)]"
            ".filter(x, x).size() == 1",
            message="exactly one of canary, soak, approval or batches must be set",
            check=lambda m: sum(x is not None for x in (m.canary, m.soak, m.approval, m.batches)) == 1,
        ),
    )

    @property
    def kind(self) -> StepKind:
        """Which step this is (the model rules guarantee exactly one)."""
        for kind in ("canary", "soak", "approval", "batches"):
            if getattr(self, kind) is not None:
                return kind
        raise ValueError("step has no kind")


DEFAULT_STEPS: tuple[Step, ...] = (Step(batches=BatchesStep()),)

BATCHES_LAST_CEL = (
    "{s}.all(x, !has(x.batches)) || "
    "(has({s}[size({s}) - 1].batches) && {s}.filter(x, has(x.batches)).size() == 1)"
)


def _batches_last(steps: list[Step]) -> bool:
    positions = [i for i, s in enumerate(steps) if s.batches is not None]
    return not positions or positions == [len(steps) - 1]


class FailurePolicy(ApiModel):
    """When a rollout stops, and what it does then."""

    max_failed_nodes: int = Field(
        default=0,
        description="Failed nodes tolerated before `action` fires; 0 means the first failed node fires it. A "
        "failed node that was drained stays cordoned and counts against maxUnavailable: when this "
        "rollout's failed nodes alone fill a budget, no node can start and `action` fires then too.",
        ge=0,
        le=100000,
    )
    failure_threshold: int | None = Field(
        default=None,
        description="Consecutive failed batches (below batches.batchThreshold) before `action` fires "
        "(NodeWright failureThreshold). Absent: batch failures alone never stop the rollout.",
        ge=1,
        le=1000,
    )
    action: Literal["halt", "rollback"] = Field(
        default="halt",
        description="halt: start no further node and report Degraded. rollback: enter phase RollingBack "
        "and return every node this rollout changed (the failed one included) to the package versions "
        "and config it carried before: a downgrade runs the lower version's apply, config and "
        "interrupt; a package the rollout installed is uninstalled. It runs under the same "
        "maxUnavailable, compartments, windows and batches (no canary, soak or approval), cordoning "
        "and draining as going forward; any node failing it halts it (Halted, never another "
        "rollback). It cannot undo what scripts did beyond the package's own stages. Afterwards the "
        "profile shows RolledBack and waits for a spec with other packages.",
    )


def _steps_rule(prefix: str) -> LocalRule:
    return LocalRule(
        name=f"{prefix}steps-batches-last",
        cel="!has(self.steps) || " + BATCHES_LAST_CEL.format(s="self.steps"),
        message="steps may contain at most one batches step, and it must be the last step",
        field_path=".steps",
        check=lambda m: _batches_last(m.steps),
    )


class Compartment(ApiModel):
    """A subset of the targeted nodes with its own budget and steps (e.g. one per rack or zone). Nodes
    matching no compartment use the policy's top-level settings."""

    name: str = Field(
        description="Compartment name (unique).", max_length=MAX_SHORT_STRING, pattern=DNS_LABEL_PATTERN
    )
    selector: LabelSelector = Field(description="Nodes in this compartment; must not be empty.")
    max_unavailable: IntOrPercent | None = Field(
        default=None,
        description="This compartment's own cap (count or percent of its nodes). Absent: the policy's. The "
        "policy-wide maxUnavailable caps the sum across compartments in any case.",
    )
    steps: list[Step] = Field(
        default_factory=list,
        description="This compartment's own steps. Empty: the policy's steps.",
        max_length=MAX_STEPS,
    )
    failure: FailurePolicy | None = Field(
        default=None, description="This compartment's failure rules. Absent: the policy's."
    )

    local_rules = (
        selector_required("compartment-selector-nonempty", "select every node"),
        _steps_rule("compartment-"),
        LocalRule(
            name="compartment-maxunavailable-positive",
            cel="!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable >= 1 : "
            "self.maxUnavailable != '0%')",
            message="maxUnavailable must allow at least one node (>= 1 or > 0%)",
            field_path=".maxUnavailable",
            check=lambda m: m.max_unavailable is None or m.max_unavailable not in (0, "0%"),
        ),
    )


class DeploymentPolicySpec(ApiModel):
    """How fast and how safely changes roll out."""

    max_unavailable: IntOrPercent = Field(
        default=1,
        description="Hard cap on nodes disrupted at once (count, or percent of targeted nodes rounded down "
        "but at "
        "least 1). Always applies: canaries, batches, config and version changes, and across profiles "
        "sharing nodes.",
    )
    steps: list[Step] = Field(
        default_factory=list,
        description="Ordered steps: canary, soak, approval, then batches (last). Empty: one node at a time "
        "(batches fixed, initial 1).",
        max_length=MAX_STEPS,
    )
    failure: FailurePolicy = Field(
        default_factory=FailurePolicy,
        json_schema_extra={"default": {}},
        description="When the rollout stops.",
    )
    windows: list[MaintenanceWindow] = Field(
        default_factory=list,
        description="Maintenance windows; nodes start only inside one. Empty: any time.",
        max_length=MAX_WINDOWS,
    )
    compartments: list[Compartment] = Field(
        default_factory=list,
        description="Node subsets with their own budget and steps. A node matching several compartments uses "
        "the safest (smallest budget, then name).",
        max_length=MAX_COMPARTMENTS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    workload_label: str | None = Field(
        default=None,
        description="A pod label key whose value names the workload the pod belongs to (pods of one "
        "namespace with the same value are one workload), besides the owners fleetwright recognises "
        "(Job, JobSet, LeaderWorkerSet, Kubeflow training jobs, Volcano and Kueue pod groups). The "
        "rollout puts idle nodes first and the nodes of each workload in one batch (consecutive "
        "batches when it spans more nodes than maxUnavailable), so a training job whose pods stop "
        "together when one is evicted is interrupted once.",
        max_length=317,
        pattern=LABEL_KEY_PATTERN,
    )
    workload_wait: WorkloadWait | None = Field(
        default=None,
        description="Wait, bounded, for the workloads on a node to finish before it starts. Absent: a "
        "node starts when its turn comes and its drain evicts what runs.",
    )
    # No CRD default: the API server would write it into every stored policy, which the previous
    # release's webhook and models refuse as an unknown field (absent means true).
    workload_order: bool | None = Field(
        default=None,
        description="Order nodes by the workloads their pods belong to: idle nodes first, the nodes of "
        "each workload (its owners, or workloadLabel) in one batch; absent is true. Every rollout "
        "turn then lists the pods bound to nodes. false: zones round-robin, and a turn lists no pod "
        "unless workloadWait is set (for fleets whose nodes run no multi-node jobs, to spare the API "
        "server).",
    )
    health_checks: list[MetricCheck] = Field(
        default_factory=list,
        description="Metric checks (Prometheus queries judged by conditions) the gates refer to by name.",
        max_length=MAX_CHECKS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    node_gate: NodeGate | None = Field(
        default=None,
        description="Checks every node must pass after its last stage, before its cordon is lifted. "
        "Absent: a node goes back into service when its stages pass.",
    )
    # No CRD default, like workloadOrder: absent means off.
    preflight: bool | None = Field(
        default=None,
        description="Before a node is cordoned, run its packages' check steps (each stage's check "
        "mode, e.g. apply-check) as a preflight Job on the node in service; a node whose checks "
        "all pass is recorded at the target and never cordoned, drained or interrupted. Risky for "
        "a package whose check can pass before its work ran (it would never be applied there). A "
        "package with a check mode that has no steps gets no preflight. Absent or false: off.",
    )
    image_signatures: ImageSignatures | None = Field(
        default=None,
        description="Check each package image's cosign signature when a generation starts, against the "
        "digest it resolves to (signatures imply image pinning for this policy's rollouts). Absent: no "
        "signature check.",
    )
    allowed_registries: list[Annotated[str, Field(max_length=MAX_NAME)]] | None = Field(
        default=None,
        description="Registries (host[:port]) or repository prefixes (host/org) the package images of the "
        "NodeProfiles using this policy must come from (a prefix matches whole path components). Admission "
        "refuses a profile with an image outside them, and a change to them that would exclude an image "
        "of a profile using the policy; a rollout whose images are outside (the policy changed without "
        "admission) is Halted before any node starts. Absent: any registry (the cluster-wide "
        "admission.allowed_registries still applies).",
        max_length=32,
    )
    _since_0_1_0 = added_fields(
        "workload_label",
        "workload_wait",
        "workload_order",
        "health_checks",
        "node_gate",
        "preflight",
        "image_signatures",
        "allowed_registries",
    )

    local_rules = (
        LocalRule(
            name="maxunavailable-positive",
            cel="!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable >= 1 : "
            "self.maxUnavailable != '0%')",
            message="maxUnavailable must allow at least one node (>= 1 or > 0%)",
            field_path=".maxUnavailable",
            check=lambda m: m.max_unavailable not in (0, "0%"),
        ),
        _steps_rule(""),
    )

    def effective_steps(self) -> list[Step]:
        """The steps to run: the declared ones, or the conservative default."""
        return list(self.steps) if self.steps else [s.model_copy(deep=True) for s in DEFAULT_STEPS]

    def resolved_gate(self) -> ResolvedGate:
        """The node gate, its check names resolved (a name without a check is admission's error):
        the one place a gate is read from the policy."""
        gate = self.node_gate
        if gate is None:
            return ResolvedGate()
        by_name = {c.name: c for c in self.health_checks}
        checks = tuple(by_name[n] for n in gate.checks if n in by_name)
        return ResolvedGate(tuple(gate.validations), checks, tuple(gate.external))


class DeploymentPolicyStatus(ApiModel):
    """Observed state, written by the fleetwright controller only."""

    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation the status reflects.", ge=0
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Accepted, InUse (metav1.Condition).",
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    referenced_by: list[Annotated[str, Field(max_length=MAX_NAME)]] = Field(
        default_factory=list,
        description="NodeProfiles referencing this policy (first 100).",
        max_length=100,
    )


class DeploymentPolicy(ApiModel):
    """DeploymentPolicy: how fast and how safely changes roll out."""

    api_version: Literal["fleetwright.io/v1alpha1"] = Field(
        default="fleetwright.io/v1alpha1", description="fleetwright.io/v1alpha1."
    )
    kind: Literal["DeploymentPolicy"] = Field(default="DeploymentPolicy", description="DeploymentPolicy.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Standard object metadata.")
    spec: DeploymentPolicySpec = Field(
        default_factory=DeploymentPolicySpec,
        json_schema_extra={"default": {}},
        description="Desired rollout behaviour.",
    )
    status: DeploymentPolicyStatus | None = Field(
        default=None, description="Observed state, written by fleetwright."
    )

    @classmethod
    def from_k8s(cls, obj: dict[str, Any]) -> DeploymentPolicy:
        """Parse an object as read from the API server."""
        return cls.model_validate(obj)


BUILTIN_POLICY = DeploymentPolicy(metadata=ObjectMeta(name=BUILTIN_POLICY_NAME))
"""The policy a NodeProfile without deploymentPolicyRef gets: one node at a time, halt on first failure."""
