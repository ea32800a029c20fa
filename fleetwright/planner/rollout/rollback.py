"""Automatic rollback as pure data: the reverse plan of a rollout whose failure rule fired with
``action: rollback``.

A rollback is a rollout toward another target, run by the same engine (``rollout.decision.decide``), so
it keeps the policy's ``maxUnavailable`` (profile-wide and per compartment), its batches, windows,
and every node's interrupt, cordon and drain rules:

- which nodes: those whose record names the rolled-back rollout in a package's ``before`` (the
  node workflow writes it with the first record of a change, so the failed node and nodes still
  running when the rule fired are returned too, nodes it never reached are left alone);
- what each package returns to: its ``before`` version and config, with the definition (image,
  config values, interrupt) the spec the rollout replaced has for them; a package the rollout
  installed (``before`` without a version) is uninstalled, one it uninstalled is installed again;
- its stages: those of a change from what the rollout put there to that, as ``node.work`` plans any
  change (a downgrade runs the lower version's ``apply``, ``config``, then the interrupt and
  ``post-interrupt``), resuming after the last passed stage;
- its steps: the policy's batches only, without their fleet-gate checks (canary, soak, approval
  and the gates try a new change out; a rollback returns to a known one), and the first failed
  node halts it: a rollback that fails halts and says so; it never rolls back again.

A package whose ``before`` the replaced spec cannot reproduce (another version or config: its
image or config values are unknown here) is not guessed at: its node is held as blocked.

Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from fleetwright.planner.node.packages import DesiredPackage, PackageGraph
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import Before, PackageRecord, PendingChange
from fleetwright.planner.node.work import BlockedPackage, NodeWork, plan_node
from fleetwright.planner.policy.model import (
    GATES_SCOPE,
    BatchesStep,
    FailureAction,
    FailurePolicy,
    RolloutPolicy,
)
from fleetwright.planner.rollout.observations import Observations
from fleetwright.planner.rollout.spec import RollbackOf, RolloutSpec
from fleetwright.planner.rollout.state import Halt, RolloutState

UNKNOWN_BEFORE = "RollbackUnknownBefore"
PREVIEW_REASON = "preview: as if the failure rule fired once the rollout had changed every node it needs to"


def demanded_rollback(state: RolloutState, reason: str, now: datetime) -> RolloutState:
    """``state`` halted with ``action: rollback`` when a rollback is demanded from outside (a
    campaign's failure rule fired in another cluster), also over a halt of its own; a rollback
    already under way, or one that ran, is left as it is."""
    if not reason or state.spec.rollback is not None:
        return state
    if state.halt is not None and state.halt.action is FailureAction.ROLLBACK:
        return state
    return state.model_copy(
        update={"halt": Halt(reason=reason, action=FailureAction.ROLLBACK, scope=GATES_SCOPE, at=now)}
    )


def fires(state: RolloutState) -> bool:
    """The state halted with ``action: rollback`` and is not itself a rollback."""
    return (
        state.halt is not None and state.halt.action is FailureAction.ROLLBACK and state.spec.rollback is None
    )


def rollback_spec(
    spec: RolloutSpec, of: RollbackOf, previous: tuple[DesiredPackage, ...] | None = None
) -> RolloutSpec:
    """The spec that returns what the rollout of ``spec`` changed (``of`` names that rollout);
    ``previous``, when given, instead of ``spec.previous``."""
    # Built afresh, not model_copy'd: a copy would keep the cached target of ``spec``.
    return RolloutSpec(
        profile=spec.profile,
        packages=spec.packages,
        policy=rollback_policy(spec.policy),
        durations=spec.durations,
        previous=previous if previous is not None else spec.previous,
        rollback=of,
    )


def recorded_previous(
    spec: RolloutSpec, observations: Observations, of: RollbackOf
) -> tuple[DesiredPackage, ...]:
    """The packages as the nodes recorded them before ``of``'s rollout (each package's first
    recorded ``before`` with a version), with the rolled-back definitions otherwise: what a reader
    without the replaced profile (the CLI's ETA) can plan the return with. Its durations and
    interrupts are the rolled-back definitions'; only an estimate."""
    found: dict[str, Before] = {}
    for node in observations.nodes:
        for name, record in node.packages.items():
            before = record.before
            if before is not None and before.version is not None and before.by(of.target, of.since):
                found.setdefault(name, before)
    return tuple(
        p.model_copy(update={"version": found[p.name].version, "config": found[p.name].config})
        if p.name in found
        else p
        for p in spec.packages
    )


def rollback_of(state: RolloutState) -> RollbackOf:
    reason = state.halt.reason if state.halt is not None else "rollback"
    return RollbackOf(target=state.spec.target, since=state.rollout_since, reason=reason)


def rollback_policy(policy: RolloutPolicy) -> RolloutPolicy:
    """The policy's budgets, compartments, windows and batches; no gates; any failure halts."""
    halt = FailurePolicy(max_failed_nodes=0, action=FailureAction.HALT)
    compartments = tuple(
        c.model_copy(
            update={
                "steps": tuple(_batches(s) for s in c.steps if isinstance(s, BatchesStep)),
                "failure": None,
            }
        )
        for c in policy.compartments
    )
    return policy.model_copy(
        update={"steps": (_batches(policy.batches_step()),), "failure": halt, "compartments": compartments}
    )


def _batches(step: BatchesStep) -> BatchesStep:
    # Batch failures need no threshold of their own: the first failed node halts a rollback; nor
    # does it watch the fleet gate (the change it returns from is what the gate found bad).
    strategy = step.strategy.model_copy(update={"failure_threshold": None})
    return step.model_copy(update={"strategy": strategy, "checks": ()})


def plan_node_rollback(spec: RolloutSpec, records: Mapping[str, PackageRecord]) -> NodeWork:
    """One node's work to return what ``spec.rollback``'s rollout changed there (none: it did not
    change the node, or the node is back already)."""
    of = spec.rollback
    if of is None:
        raise ValueError("not a rollback spec")
    changed = {p.name: p for p in spec.packages}
    replaced = {p.name: p for p in spec.previous or ()}
    returns: list[DesiredPackage] = []
    effective: dict[str, PackageRecord] = {}
    unknown: list[BlockedPackage] = []
    for name in sorted(records):
        record = records[name]
        before = record.before
        if before is None or not before.by(of.target, of.since) or name not in changed:
            continue
        back = _returns_to(before, changed[name], replaced.get(name))
        if isinstance(back, str):
            unknown.append(BlockedPackage(package=name, reason=f"{UNKNOWN_BEFORE}: {back}"))
            continue
        returns.append(back)
        effective[name] = _as_left(record, changed[name], back)
    if not returns:
        return NodeWork(blocked=tuple(unknown))
    names = {p.name for p in returns}
    graph = PackageGraph(
        [p.model_copy(update={"depends_on": tuple(d for d in p.depends_on if d in names)}) for p in returns]
    )
    work = plan_node(graph, effective)
    return work.model_copy(
        update={"blocked": work.blocked + tuple(unknown), "returns_to": tuple(sorted(returns, key=_name))}
    )


def _name(package: DesiredPackage) -> str:
    return package.name


def _returns_to(
    before: Before, changed: DesiredPackage, replaced: DesiredPackage | None
) -> DesiredPackage | str:
    """What the package returns to, or why that cannot be known."""
    if before.version is None:
        # The rollout installed it: uninstall what it installed, with that definition.
        return changed.model_copy(update={"uninstall": True})
    if (
        replaced is not None
        and not replaced.uninstall
        and replaced.version == before.version
        and replaced.config == before.config
    ):
        return replaced
    had = "no such package" if replaced is None else f"{replaced.version} with other config"
    return (
        f"{changed.name} carried {before.version} before; the spec the rollout replaced has {had}, "
        "so its image and config are not known (apply the wanted spec)"
    )


def _as_left(record: PackageRecord, changed: DesiredPackage, back: DesiredPackage) -> PackageRecord:
    """The record to plan the return from: what the rollout put there (wholly or in part: a failed
    change left its host half-changed), with a pending return carried so it resumes."""
    if changed.uninstall:
        left = PackageRecord()
    else:
        left = PackageRecord(version=changed.version, config=dict(changed.config))
    pending = record.pending
    if pending is not None and _toward(pending, back):
        left = left.model_copy(update={"pending": pending})
    return left


def _toward(pending: PendingChange, back: DesiredPackage) -> bool:
    uninstalling = bool(pending.stages) and pending.stages[0] is Stage.UNINSTALL
    if back.uninstall:
        return uninstalling
    return not uninstalling and pending.version == back.version and pending.config == back.config


def preview_inputs(
    spec: RolloutSpec, observations: Observations, now: datetime
) -> tuple[RolloutSpec, Observations]:
    """What a rollback of the rollout of ``spec`` would face had that rollout changed every node it
    needs to (``fleetwright plan --rollback``): the rollback's spec, and the fleet with each such
    node's records as the rollout leaves them (changed, ``before`` kept)."""
    of = RollbackOf(target=spec.target, since=now, reason=PREVIEW_REASON)
    nodes = []
    for node in observations.nodes:
        work = plan_node(spec.graph, node.packages)
        if not work.needs_work or work.failed is not None or node.unreadable is not None:
            # The rollout never starts these (a failure recorded earlier, an unreadable record).
            nodes.append(node)
            continue
        records = dict(node.packages)
        for package in work.packages:
            old = records.get(package.package, PackageRecord())
            wanted = spec.graph.packages[package.package]
            before = Before(target=of.target, since=of.since, version=old.version, config=dict(old.config))
            left = (
                PackageRecord()
                if wanted.uninstall
                else PackageRecord(version=wanted.version, config=wanted.config)
            )
            records[package.package] = left.model_copy(update={"before": before})
        nodes.append(node.model_copy(update={"packages": records, "packages_key": None}))
    return rollback_spec(spec, of), observations.model_copy(update={"nodes": tuple(nodes)})
