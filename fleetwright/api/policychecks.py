"""The DeploymentPolicy checks across fields, on a parsed spec: unique compartment and check
names, gates naming defined checks, canaries and batches beyond the budget, failure rules the
budget fills before they fire, and a failure threshold without a batches step.

Each check adds what it finds to the ``Result`` it is given (``fleetwright.api.validation`` runs
them). Never raises on a parsed spec and never does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from fleetwright.api.deploymentpolicy import DeploymentPolicySpec, FailurePolicy, Step
from fleetwright.api.health import MetricCheck

if TYPE_CHECKING:
    from fleetwright.api.validation import Result


def check_policy_spec(spec: DeploymentPolicySpec, result: Result) -> None:
    """Cross-field checks on a parsed DeploymentPolicy spec."""
    result.check_unique(
        [c.name for c in spec.compartments], "spec.compartments", "name", "compartment-duplicate"
    )
    _check_steps_against_budget(spec.steps, spec.max_unavailable, "spec.steps", result)
    for i, comp in enumerate(spec.compartments):
        budget = comp.max_unavailable if comp.max_unavailable is not None else spec.max_unavailable
        _check_steps_against_budget(comp.steps, budget, f"spec.compartments[{i}].steps", result)
    _check_failures_against_budget(spec, result)
    _check_health(spec, result)
    has_batches = any(s.batches is not None for s in spec.effective_steps())
    if spec.failure.failure_threshold is not None and not has_batches:
        result.warn(
            "spec.failure.failureThreshold",
            "has no effect without a batches step",
            "failure-threshold-unused",
        )


def _check_health(spec: DeploymentPolicySpec, result: Result) -> None:
    """Check names are unique, and every gate names a defined check."""
    steps = [(f"spec.steps[{i}]", s) for i, s in enumerate(spec.steps)]
    for c, compartment in enumerate(spec.compartments):
        steps += [(f"spec.compartments[{c}].steps[{i}]", s) for i, s in enumerate(compartment.steps)]
    named = [
        (f"{path}.{kind}.checks[{i}]", name, f"{kind}-unknown-check")
        for path, step in steps
        for kind, names in (("soak", step.soak), ("batches", step.batches))
        for i, name in enumerate(names.checks if names is not None else ())
    ]
    if spec.node_gate is not None:
        named += [
            (f"spec.nodeGate.checks[{i}]", name, "node-gate-unknown-check")
            for i, name in enumerate(spec.node_gate.checks)
        ]
    check_names(spec.health_checks, named, result)


def check_names(checks: Sequence[MetricCheck], named: Iterable[tuple[str, str, str]], result: Result) -> None:
    """A list of ``spec.healthChecks``: its names unique, and each (field path, name, rule) of a
    gate naming one of them (a DeploymentPolicy's gates, a Campaign's stages)."""
    result.check_unique([c.name for c in checks], "spec.healthChecks", "name", "health-check-duplicate")
    known = {c.name for c in checks}
    defined = f"spec.healthChecks has: {', '.join(sorted(known)) or 'none'}"
    for path, name, rule in named:
        if name not in known:
            result.error(path, f"unknown check {name!r} ({defined})", rule)


def _check_steps_against_budget(steps: list[Step], budget: int | str, path: str, result: Result) -> None:
    if not isinstance(budget, int):
        return
    for i, step in enumerate(steps):
        if step.canary is not None and step.canary.count is not None and step.canary.count > budget:
            result.warn(
                f"{path}[{i}].canary.count",
                f"exceeds maxUnavailable ({budget}): the canary runs {budget} node(s) at a time",
                "canary-exceeds-budget",
            )
        if step.batches is not None and step.batches.initial > budget:
            result.warn(
                f"{path}[{i}].batches.initial",
                f"exceeds maxUnavailable ({budget}): batches are capped at {budget}",
                "batch-exceeds-budget",
            )


def _check_failures_against_budget(spec: DeploymentPolicySpec, result: Result) -> None:
    """Warn where a failure rule tolerates as many failed nodes as its budget holds: failed nodes
    stay cordoned and count against maxUnavailable, so they can fill it before the rule fires by
    count. The rollout then fires the rule because no node can start (docs/status.md)."""
    failed, budget = "spec.failure.maxFailedNodes", "spec.maxUnavailable"
    _warn_failures_fill(spec.failure, spec.max_unavailable, (failed, budget), failed, result)
    for i, comp in enumerate(spec.compartments):
        if comp.failure is None and comp.max_unavailable is None:
            continue  # the policy's own rule and cap: warned above
        base = f"spec.compartments[{i}]"
        own_failed = f"{base}.failure.maxFailedNodes" if comp.failure is not None else failed
        own_budget = f"{base}.maxUnavailable" if comp.max_unavailable is not None else budget
        _warn_failures_fill(
            comp.failure if comp.failure is not None else spec.failure,
            comp.max_unavailable if comp.max_unavailable is not None else spec.max_unavailable,
            (own_failed, own_budget),
            own_failed if comp.failure is not None else own_budget,  # on the compartment's own field
            result,
        )


def _warn_failures_fill(
    failure: FailurePolicy, budget: int | str, paths: tuple[str, str], at: str, result: Result
) -> None:
    """``paths``: where ``failure.maxFailedNodes`` and ``budget`` are set; the warning is on ``at``."""
    tolerated = failure.max_failed_nodes
    where = ""
    if isinstance(budget, int):
        if tolerated < budget:
            return
    else:
        percent = int(budget.rstrip("%"))
        if tolerated == 0 or not 0 < percent < 100:
            return  # 0% is an error of its own
        # The cap is max(1, nodes * percent // 100): at most ``tolerated`` below this many nodes.
        fewest = -(-(tolerated + 1) * 100 // percent)
        where = f" on fewer than {fewest} nodes"
    if at == paths[0]:
        when = f"{tolerated} >= {paths[1]} ({budget}){where}"
    else:
        when = f"{budget}{where} <= {paths[0]} ({tolerated})"
    result.warn(
        at,
        f"{when}: failed nodes stay cordoned and can fill the budget before the rule fires by count; "
        f"then {failure.action} fires as no node can start",
        "failures-fill-budget",
    )
