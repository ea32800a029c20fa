"""The gate steps of a DeploymentPolicy: the steps that decide whether a rollout goes on, a
canary (a few nodes first), a soak (wait and watch the nodes updated so far) and an approval (wait
for a human). The batches step, which updates the remaining nodes, and ``Step``, one step of any
kind, are the policy's own (``fleetwright.api.deploymentpolicy``). Must not do I/O.
"""

from __future__ import annotations

from pydantic import Field

from fleetwright.api.common import ApiModel, LabelSelector, LocalRule, exactly_one_of, selector_nonempty_cel
from fleetwright.api.compat import added_fields
from fleetwright.api.health import MAX_CHECKS, CheckName, HealthGate


class CanaryStep(ApiModel):
    """Update a few nodes first; a failed canary stops the rollout before any other node is touched."""

    count: int | None = Field(
        default=None,
        description="How many nodes (deterministically chosen) form the canary. Exclusive with selector.",
        ge=1,
        le=1000,
    )
    selector: LabelSelector | None = Field(
        default=None,
        description="Nodes (among the targeted ones) that form the canary. Exclusive with count; must not "
        "be empty.",
    )

    local_rules = (
        exactly_one_of("canary-count-or-selector", "count", "selector"),
        LocalRule(
            name="canary-selector-nonempty",
            cel="!has(self.selector) || " + "(" + selector_nonempty_cel("self.selector") + ")",
            message="selector must have at least one requirement (an empty selector would select every node)",
            field_path=".selector",
            reason="FieldValueRequired",
            check=lambda m: m.selector is None or not m.selector.is_empty(),
        ),
    )


class SoakStep(ApiModel):
    """Wait and watch the nodes updated so far before going on."""

    duration_seconds: int = Field(description="How long to soak.", ge=1, le=30 * 86400)
    health_gate: HealthGate = Field(
        default_factory=HealthGate,
        json_schema_extra={"default": {}},
        description="What must hold during the soak.",
    )
    checks: list[CheckName] = Field(
        default_factory=list,
        description="Fleet gate: names of spec.healthChecks measured while the soak lasts, over the nodes "
        "updated so far ({{nodes}}). The soak ends only once its duration passed and every check "
        "passed; a Failed check fires the failure rule before the next batch, an Inconclusive one "
        "waits for `fleetwright approve <scope>/<soak>`, a MonitoringUnavailable one (Prometheus "
        "does not answer) holds the soak until it answers (or that approval).",
        max_length=MAX_CHECKS,
    )
    _since_0_1_0 = added_fields("checks")


class ApprovalStep(ApiModel):
    """Wait for a human (`fleetwright approve` or the approve annotation) before going on."""

    timeout_seconds: int | None = Field(
        default=None,
        description="Halt the rollout when nobody approves within this time. Absent: wait indefinitely, "
        "visibly "
        "(condition Paused, reason AwaitingApproval).",
        ge=60,
        le=90 * 86400,
    )
