"""Health gates of a DeploymentPolicy: metric checks (a PromQL query judged by conditions over its
result, measured ``count`` times), the node gate that runs them on each node after its last
stage, before its cordon is lifted, and a soak's health gate (the node conditions every updated
node must keep while it lasts).

The counting rules are Argo Rollouts' AnalysisTemplate's (failureLimit, inconclusiveLimit,
consecutiveErrorLimit, count, interval, initialDelay), except that Errors hold a gate
(MonitoringUnavailable) instead of failing it; the planner's ``health.analysis`` applies them. The
query's placeholders and the conditions are checked here, so admission rejects what cannot run.
Must not do I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from fleetwright.api.common import (
    DNS_LABEL_PATTERN,
    LABEL_KEY_PATTERN,
    MAX_SHORT_STRING,
    ApiModel,
    LocalRule,
    exactly_one_of,
)
from fleetwright.api.healthcondition import (
    MAX_CONDITION,
    MAX_NODES,
    MAX_RESULT,
    MAX_STEPS,
    check_condition,
)
from fleetwright.api.packageparts import EnvVar, PackageResources

MAX_CHECKS = 16
MAX_VALIDATIONS = 8
MAX_ARGS = 64
MAX_QUERY = 4096
PLACEHOLDERS = ("node", "nodes", "profile")
"""``{{node}}``: the node the gate holds; ``{{nodes}}``: the nodes updated so far (a regular
expression alternation, for ``=~``); ``{{profile}}``: the NodeProfile's name."""
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PAIRS = {")": "(", "]": "[", "}": "{"}


def nodes_alternation(nodes: Iterable[str]) -> str:
    """``{{nodes}}``: node names as a regex alternation inside a double-quoted PromQL string (a
    name's dots escaped as ``\\\\.``, which the string turns into the regex's ``\\.``)."""
    return "|".join(name.replace(".", "\\\\.") for name in nodes)


def render_query(query: str, values: dict[str, str]) -> str:
    """``query`` with every ``{{name}}`` replaced by ``values[name]``."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], query)


def check_query(query: str) -> str:
    """A pydantic validator: what can be checked of PromQL without a server (known placeholders,
    balanced brackets and quotes), naming the first problem."""
    for match in _PLACEHOLDER.finditer(query):
        if match.group(1) not in PLACEHOLDERS:
            known = ", ".join("{{" + p + "}}" for p in PLACEHOLDERS)
            raise ValueError(f"unknown placeholder {match.group(0)!r} in query (known: {known})")
    _check_brackets(_PLACEHOLDER.sub("x", query))
    return query


def _check_brackets(query: str) -> None:
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i, char in enumerate(query):
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "\"'`":
            quote = char
        elif char in "([{":
            stack.append(char)
        elif char in _PAIRS and (not stack or stack.pop() != _PAIRS[char]):
            raise ValueError(f"query does not parse: unbalanced {char!r} at column {i + 1}")
    if quote is not None:
        raise ValueError(f"query does not parse: unterminated string starting with {quote}")
    if stack:
        raise ValueError(f"query does not parse: unclosed {stack[-1]!r}")


Condition = Annotated[str, AfterValidator(check_condition)]


class MetricCheck(ApiModel):
    """A Prometheus query measured ``count`` times, ``intervalSeconds`` apart after
    ``initialDelaySeconds``; each measurement is Successful, Failed, Inconclusive (no data, or
    neither condition holds) or Error (the query or the condition could not be evaluated)."""

    name: str = Field(
        description="The check's name (unique in the policy); gates refer to it.",
        max_length=MAX_SHORT_STRING,
        pattern=DNS_LABEL_PATTERN,
    )
    query: Annotated[str, AfterValidator(check_query)] = Field(
        description="A PromQL instant query. Placeholders: {{node}} (the node the gate holds), {{nodes}} "
        "(the nodes updated so far, as a regex alternation for =~) and {{profile}} (the NodeProfile).",
        min_length=1,
        max_length=MAX_QUERY,
    )
    success_condition: Condition | None = Field(
        default=None,
        description="An expression over `result` (the list of the query's sample values, or the value of "
        "a scalar query), e.g. `result[0] == 0` or `all(r < 5 for r in result)`. True: the measurement "
        "is Successful. With failureCondition too, neither holding is Inconclusive; alone, false is "
        "Failed. A bounded language: numbers, comparisons, and/or/not, + - * / %, result[i], all any "
        f"len min max sum abs and generators; at most {MAX_NODES} expression nodes and {MAX_STEPS} steps "
        f"over a result of {MAX_RESULT} values (docs/health-gates.md).",
        min_length=1,
        max_length=MAX_CONDITION,
    )
    failure_condition: Condition | None = Field(
        default=None,
        description="An expression over `result`, in successCondition's language; true: the measurement "
        "is Failed (it wins over successCondition). Alone, false is Successful.",
        min_length=1,
        max_length=MAX_CONDITION,
    )
    interval_seconds: int = Field(default=30, description="Time between two measurements.", ge=1, le=86400)
    count: int = Field(default=1, description="How many measurements the check takes.", ge=1, le=1000)
    initial_delay_seconds: int = Field(
        default=0, description="Wait before the first measurement.", ge=0, le=86400
    )
    failure_limit: int = Field(
        default=0,
        description="Failed measurements tolerated: one more fails the check at once.",
        ge=0,
        le=1000,
    )
    inconclusive_limit: int = Field(
        default=0,
        description="Inconclusive measurements tolerated: one more makes the check Inconclusive at once "
        "(the rollout waits, named, for fleetwright approve or abort).",
        ge=0,
        le=1000,
    )
    consecutive_error_limit: int = Field(
        default=4,
        description="Measurements in a row that may be Error (Prometheus unreachable, an erroring query, a "
        "condition that cannot be evaluated on the result). An Error does not use up count: it is "
        "measured again after intervalSeconds. The wait is named MonitoringUnavailable from the "
        "first Error in a row, with the count; one Error more than this limit holds the gate "
        "(the node Blocked, the soak or new batches held, counted in the metric, approvable), "
        "never failed (unlike Argo Rollouts), measuring on until an answer lifts the hold.",
        ge=0,
        le=1000,
    )

    local_rules = (
        LocalRule(
            name="metric-check-condition",
            cel="has(self.successCondition) || has(self.failureCondition)",
            message="at least one of successCondition or failureCondition must be set",
            reason="FieldValueRequired",
            check=lambda m: m.success_condition is not None or m.failure_condition is not None,
        ),
    )

    def describe(self) -> str:
        """The check's schedule and limits in one line (``fleetwright plan``)."""
        schedule = f"{self.count} measurement(s) {self.interval_seconds}s apart"
        if self.initial_delay_seconds:
            schedule += f" after {self.initial_delay_seconds}s"
        limits = (
            f"failureLimit {self.failure_limit}, inconclusiveLimit {self.inconclusive_limit}, "
            f"consecutiveErrorLimit {self.consecutive_error_limit}"
        )
        return f"{self.name}: {schedule} ({limits}), at least {self.span_seconds()}s"

    def span_seconds(self) -> int:
        """The time the check takes when every measurement passes (queries not counted)."""
        return self.initial_delay_seconds + self.interval_seconds * (self.count - 1)


CheckName = Annotated[str, Field(max_length=MAX_SHORT_STRING, pattern=DNS_LABEL_PATTERN)]


class ExternalValidator(ApiModel):
    """An external actor's verdict on the node the gate holds (a burn-in controller, a
    fault-management system): a node condition that turned to ``conditionStatus`` since the node's
    update began, or an annotation set to ``annotationValue`` (fleetwright removes the annotation
    once it read it, so the next change needs a new verdict). None within ``timeoutSeconds``
    fails the node."""

    name: str = Field(
        description="The validator's name, shown in status.",
        max_length=MAX_SHORT_STRING,
        pattern=DNS_LABEL_PATTERN,
    )
    condition_type: str | None = Field(
        default=None,
        description="A node condition type the actor sets, e.g. BurnInPassed. Exclusive with annotation.",
        min_length=1,
        max_length=316,
    )
    condition_status: Literal["True", "False"] = Field(
        default="True", description="The condition's status that passes the gate (the other fails it)."
    )
    annotation: str | None = Field(
        default=None,
        description="A node annotation key the actor sets. Exclusive with conditionType.",
        max_length=317,
        pattern=LABEL_KEY_PATTERN,
    )
    annotation_value: str = Field(
        default="passed",
        description="The annotation value that passes the gate; any other value fails it.",
        min_length=1,
        max_length=MAX_SHORT_STRING,
    )
    timeout_seconds: int = Field(
        description="How long the gate waits for the verdict before it fails the node.", ge=10, le=7 * 86400
    )

    local_rules = (
        exactly_one_of("external-validator-condition-or-annotation", "condition_type", "annotation"),
    )

    def describe(self) -> str:
        what = (
            f"condition {self.condition_type}={self.condition_status}"
            if self.condition_type is not None
            else f"annotation {self.annotation}={self.annotation_value}"
        )
        return f"{self.name}: waits up to {self.timeout_seconds}s for {what}"


class ValidationContainer(ApiModel):
    """A container run on the node, under fleetwright's cordon, after its stages and before the
    gate's checks (``dcgmi diag``, an NCCL all-reduce test, a burn-in): one run as a Job pinned to
    the node; a non-zero exit, a timeout or an image that never pulls fails the node."""

    name: str = Field(
        description="The validation's name (unique in the gate), shown in status and `fleetwright logs`.",
        max_length=MAX_SHORT_STRING,
        pattern=DNS_LABEL_PATTERN,
    )
    image: str = Field(
        description="The container image, with its tag or digest, e.g. "
        "`ghcr.io/fleetwright/packages/gpu-health:1.0.0`.",
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
    )
    command: list[Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=list, description="The entrypoint (the image's when empty).", max_length=MAX_ARGS
    )
    args: list[Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=list, description="Arguments to the entrypoint.", max_length=MAX_ARGS
    )
    env: list[EnvVar] = Field(
        default_factory=list, description="Environment variables of the container.", max_length=MAX_ARGS
    )
    timeout_seconds: int = Field(
        default=1800,
        description="The Job's activeDeadlineSeconds: a run that lasts longer fails the node.",
        ge=10,
        le=7 * 86400,
    )
    resources: PackageResources | None = Field(
        default=None, description="CPU and memory of the container (GPUs are the node's: it is drained)."
    )
    privileged: bool = Field(
        default=False,
        description="Run privileged as root with hostPID, hostNetwork and the host's root mounted "
        "read-only at /host (HostToContainer), as GPU diagnostics need (e.g. `chroot /host dcgmi diag`). "
        "False: no privilege, no capability, non-root.",
    )

    def describe(self) -> str:
        """One line for ``fleetwright plan``."""
        run = " ".join([self.image, *self.command, *self.args])
        privileged = ", privileged" if self.privileged else ""
        return f"{self.name}: {run} (at most {self.timeout_seconds}s{privileged})"


@dataclass(frozen=True)
class ResolvedGate:
    """A policy's node gate with its check names resolved to the checks: what a node runs, in
    order (validations, then the checks and external validators together). Empty without a gate."""

    validations: tuple[ValidationContainer, ...] = ()
    checks: tuple[MetricCheck, ...] = ()
    external: tuple[ExternalValidator, ...] = ()


def _unique_names(gate: NodeGate) -> bool:
    names = [v.name for v in gate.validations]
    return len(names) == len(set(names))


class NodeGate(ApiModel):
    """Checks each node must pass after its last stage before fleetwright lifts its cordon; until
    then it stays cordoned and counts against maxUnavailable. Validation containers run first, one
    after another; a failed one, or a Failed check, fails the node (the failure policy
    applies as for a failed stage); an Inconclusive check waits for a human; a check whose
    Prometheus does not answer holds the node (MonitoringUnavailable) until it answers."""

    checks: list[CheckName] = Field(
        default_factory=list,
        description="Names of spec.healthChecks, run together on the node.",
        max_length=MAX_CHECKS,
    )
    external: list[ExternalValidator] = Field(
        default_factory=list,
        description="External actors' verdicts the gate waits for, together with the checks.",
        max_length=8,
    )
    validations: list[ValidationContainer] = Field(
        default_factory=list,
        description="Containers run on the node one after another, under the cordon, before the checks "
        "and external validators; the first that fails fails the node.",
        max_length=MAX_VALIDATIONS,
    )

    local_rules = (
        LocalRule(
            name="node-gate-nonempty",
            cel="(has(self.checks) && size(self.checks) > 0) || "
            "(has(self.external) && size(self.external) > 0) || "
            "(has(self.validations) && size(self.validations) > 0)",
            message="a node gate needs at least one check, external validator or validation",
            check=lambda m: bool(m.checks or m.external or m.validations),
        ),
        LocalRule(
            name="node-gate-validation-names-unique",
            cel="!has(self.validations) || "
            "self.validations.all(v, self.validations.exists_one(w, w.name == v.name))",
            message="validation names must be unique in the node gate",
            field_path=".validations",
            reason="FieldValueDuplicate",
            check=_unique_names,
        ),
    )


class NodeConditionRequirement(ApiModel):
    """A node condition that must have a given status on updated nodes."""

    type: str = Field(
        description="Node condition type, e.g. Ready or GpuHealthy.", min_length=1, max_length=316
    )
    status: Literal["True", "False", "Unknown"] = Field(description="Required status of the condition.")


class HealthGate(ApiModel):
    """What must hold on every updated node throughout a soak; otherwise the soak fails."""

    node_ready: bool = Field(default=True, description="Every updated node must stay Ready.")
    node_conditions: list[NodeConditionRequirement] = Field(
        default_factory=list,
        description="Further node conditions (e.g. from node-problem-detector) with their required status.",
        max_length=16,
    )
