"""From the API models (``fleetwright.api``) to the planner's own frozen types.

The only module of the planner that knows the CR shapes: defaults are resolved here (step names,
strategy knobs, failure rules), so the engine never sees an optional knob. Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwright.api.common import LabelSelector
from fleetwright.api.deploymentpolicy import BatchesStep as ApiBatchesStep
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.deploymentpolicy import FailurePolicy as ApiFailurePolicy
from fleetwright.api.deploymentpolicy import Step as ApiStep
from fleetwright.api.health import MetricCheck
from fleetwright.api.nodeprofile import Interrupt as ApiInterrupt
from fleetwright.api.nodeprofile import NodeProfile, Package
from fleetwright.planner.node.durations import StageDurations
from fleetwright.planner.node.interrupts import NO_INTERRUPT, Interrupt, InterruptKind
from fleetwright.planner.node.packages import ConfigInterruptRule, DesiredPackage, config_digests
from fleetwright.planner.policy.model import (
    ApprovalStep,
    BatchesStep,
    Budget,
    CanaryStep,
    Compartment,
    FailureAction,
    FailurePolicy,
    HealthGate,
    RolloutPolicy,
    SoakStep,
    Step,
    Strategy,
    StrategyKind,
    WorkloadWait,
)
from fleetwright.planner.policy.selectors import Requirement, Selector
from fleetwright.planner.policy.windows import Window
from fleetwright.planner.rollout.spec import RolloutSpec


def interrupt(api: ApiInterrupt | None) -> Interrupt:
    if api is None:
        return NO_INTERRUPT
    kind = InterruptKind(api.type)
    services = tuple(sorted(set(api.services))) if kind is InterruptKind.SERVICE else ()
    return Interrupt(kind=kind, services=services)


def package(api: Package) -> DesiredPackage:
    return DesiredPackage(
        name=api.name,
        version=api.version,
        image=api.image_reference(),
        depends_on=tuple(dep.name for dep in api.depends_on),
        interrupt=interrupt(api.interrupt),
        config=config_digests(api.config_map),
        config_interrupts=tuple(
            ConfigInterruptRule(pattern=ci.key, interrupt=interrupt(ci.interrupt))
            for ci in api.config_interrupts
        ),
        uninstall=api.uninstall.apply,
    )


def selector(api: LabelSelector) -> Selector:
    return Selector(
        match_labels=dict(api.match_labels),
        match_expressions=tuple(
            Requirement(key=r.key, operator=r.operator, values=tuple(r.values)) for r in api.match_expressions
        ),
    )


def budget(value: int | str) -> Budget:
    if isinstance(value, int):
        return Budget(count=value)
    return Budget(percent=int(value.rstrip("%")))


def strategy(api: ApiBatchesStep, failure: ApiFailurePolicy) -> Strategy:
    return Strategy(
        kind=StrategyKind(api.strategy),
        initial_batch=api.initial,
        delta=api.effective_delta(),
        growth_factor=api.effective_growth_factor(),
        batch_threshold=api.batch_threshold,
        failure_threshold=failure.failure_threshold,
        safety_limit=api.safety_limit,
        max_batch_size=api.max_batch_size,
    )


def step(
    api: ApiStep, index: int, failure: ApiFailurePolicy, checks: Mapping[str, MetricCheck] | None = None
) -> Step:
    # Unnamed steps get their kind and position, so approval ids stay stable while the list does.
    name = api.name or f"{api.kind}-{index}"
    if api.canary is not None:
        chosen = selector(api.canary.selector) if api.canary.selector is not None else None
        return CanaryStep(name=name, count=api.canary.count, selector=chosen)
    if api.soak is not None:
        gate = api.soak.health_gate
        conditions = {c.type: c.status for c in gate.node_conditions}
        return SoakStep(
            name=name,
            duration_seconds=api.soak.duration_seconds,
            health_gate=HealthGate(node_ready=gate.node_ready, conditions=conditions),
            checks=tuple((checks or {})[n] for n in api.soak.checks if n in (checks or {})),
        )
    if api.approval is not None:
        return ApprovalStep(name=name, timeout_seconds=api.approval.timeout_seconds)
    assert api.batches is not None
    return BatchesStep(
        name=name,
        strategy=strategy(api.batches, failure),
        pause_seconds=api.batches.soak_seconds,
        reset_batch_size=api.batches.reset_batch_state_on_completion,
        checks=tuple((checks or {})[n] for n in api.batches.checks if n in (checks or {})),
    )


def failure_policy(api: ApiFailurePolicy) -> FailurePolicy:
    return FailurePolicy(max_failed_nodes=api.max_failed_nodes, action=FailureAction(api.action))


def policy(api: DeploymentPolicy) -> RolloutPolicy:
    spec = api.spec
    known = {c.name: c for c in spec.health_checks}
    steps = tuple(step(s, i, spec.failure, known) for i, s in enumerate(spec.effective_steps()))
    compartments = tuple(
        Compartment(
            name=c.name,
            selector=selector(c.selector),
            max_unavailable=budget(c.max_unavailable) if c.max_unavailable is not None else None,
            steps=tuple(step(s, i, c.failure or spec.failure, known) for i, s in enumerate(c.steps)),
            failure=failure_policy(c.failure) if c.failure is not None else None,
        )
        for c in spec.compartments
    )
    windows = tuple(
        Window(
            name=f"window-{i}",
            cron=w.schedule,
            duration_seconds=w.duration_seconds,
            timezone=w.time_zone,
        )
        for i, w in enumerate(spec.windows)
    )
    return RolloutPolicy(
        max_unavailable=budget(spec.max_unavailable),
        steps=steps,
        failure=failure_policy(spec.failure),
        windows=windows,
        compartments=compartments,
        workload_label=spec.workload_label,
        workload_order=spec.workload_order is not False,
        workload_wait=(
            WorkloadWait(
                selector=selector(spec.workload_wait.selector),
                timeout_seconds=spec.workload_wait.timeout_seconds,
            )
            if spec.workload_wait is not None
            else None
        ),
        node_gate=spec.node_gate is not None,
        preflight=bool(spec.preflight),
    )


def rollout_spec(
    profile: NodeProfile,
    deployment_policy: DeploymentPolicy,
    durations: StageDurations | None = None,
    *,
    removing: bool = False,
    previous: NodeProfile | None = None,
) -> RolloutSpec:
    """Everything one rollout of ``profile`` under ``deployment_policy`` needs. With ``removing``
    (the profile is being deleted) the rollout converges to ``removal_packages`` instead;
    ``previous``: the profile as it was before its packages last changed (what a rollback returns
    to)."""
    return RolloutSpec(
        profile=profile.metadata.name,
        packages=removal_packages(profile) if removing else tuple(package(p) for p in profile.spec.packages),
        policy=policy(deployment_policy),
        durations=(durations or StageDurations()).model_copy(
            update={"gate": gate_seconds(deployment_policy)}
        ),
        previous=tuple(package(p) for p in previous.spec.packages) if previous is not None else None,
    )


def gate_seconds(deployment_policy: DeploymentPolicy) -> int:
    """How long the node gate holds a node when every measurement passes (its checks run
    together, so the longest one), with a second per measurement for the queries."""
    checks = deployment_policy.spec.resolved_gate().checks
    return max((c.span_seconds() + c.count for c in checks), default=0)


def removal_packages(profile: NodeProfile) -> tuple[DesiredPackage, ...]:
    """What a deleted profile converges to: every package with ``uninstall.enabled`` uninstalled.

    Packages that cannot be uninstalled are left out altogether, so the removal never installs
    anything (a node that joins during the deletion gets no work) and leaves them in place where
    they are. Dependencies on left-out packages are dropped: nothing orders against a package
    that is not touched."""
    kept = {p.name for p in profile.spec.packages if p.uninstall.enabled}
    return tuple(
        package(p).model_copy(
            update={"uninstall": True, "depends_on": tuple(d.name for d in p.depends_on if d.name in kept)}
        )
        for p in profile.spec.packages
        if p.name in kept
    )


def targets(profile: NodeProfile, labels: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` is targeted by ``profile`` (allNodes, or its nodeSelector; an
    empty selector targets nothing)."""
    if profile.spec.all_nodes:
        return True
    if profile.spec.node_selector is None:
        return False
    return selector(profile.spec.node_selector).matches(labels)
