"""Per-node work: from a profile's desired packages and one node's recorded package state, the
action per package (install, upgrade, downgrade, config-only, uninstall), its stages in dependency
order, and the merged interrupt(s) the node needs.

Semantics (NodeWright's, so packages see the stage order they were written for; the stages are
docs/package-format.md §3.2):
- semver decides install / upgrade / downgrade; a downgrade runs ``apply`` of the lower version and
  no automatic uninstall (NodeWright v0.16+).
- a config-only change runs ``config`` and only the interrupts its changed keys map to
  (``configInterrupts``, globs); a version change also runs the package's own interrupt.
- dependency *phases*: a package starts only when every dependency with work on this node has
  completed, including its interrupt. All packages ready together form one phase and share one
  merged interrupt (reboot > restartAllServices > service > none; unit lists unioned).
- a pending change toward the same target resumes after its last passed stage, so a restart never
  re-runs a completed stage; a pending change toward another target is replanned from what is
  installed.
- a package that depends on one being uninstalled is blocked (``DependencyUninstalled``), without
  cascading to its own dependents.

Must not decide when a node runs (that is ``rollout``); no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache

import semver

from fleetwright.planner.base import Frozen
from fleetwright.planner.node.interrupts import (
    NO_INTERRUPT,
    Interrupt,
    InterruptKind,
    changed_keys,
    config_interrupt,
    merge,
)
from fleetwright.planner.node.packages import DesiredPackage, PackageGraph
from fleetwright.planner.node.stages import Action, Stage
from fleetwright.planner.node.state import PackageRecord, PendingChange, record_key


class PackageWork(Frozen):
    """The remaining work of one package on one node."""

    package: str
    action: Action
    from_version: str | None = None
    to_version: str | None = None
    stages: tuple[Stage, ...]
    changed_keys: tuple[str, ...] = ()
    interrupt: Interrupt = NO_INTERRUPT
    phase: int = 0
    resumed: bool = False


class NodeStep(Frozen):
    """One stage to run on the node. Work stages name one package; a merged interrupt names every
    package it stands for (the first name is the one whose pod runs it, NodeWright's rule)."""

    phase: int
    stage: Stage
    packages: tuple[str, ...]
    interrupt: Interrupt | None = None

    @property
    def check(self) -> str | None:
        return self.stage.check


class BlockedPackage(Frozen):
    package: str
    reason: str


class NodeWork(Frozen):
    """Everything a node needs for the profile's desired state, in order. It names no node: nodes
    with the same recorded state share one value."""

    packages: tuple[PackageWork, ...] = ()
    steps: tuple[NodeStep, ...] = ()
    blocked: tuple[BlockedPackage, ...] = ()
    failed: str | None = None
    """Set when a pending change toward the current target already failed on this node."""
    returns_to: tuple[DesiredPackage, ...] | None = None
    """Set on a rollback's work (``planner.rollout.rollback``): what each package with work returns to
    (a rollback plans each node against its own records of what the rollout replaced)."""

    @property
    def needs_work(self) -> bool:
        return bool(self.steps)

    @property
    def interrupt(self) -> Interrupt:
        """The strongest interrupt of any phase (what the node will go through at worst)."""
        return merge(step.interrupt for step in self.steps if step.interrupt is not None)

    @property
    def needs_drain(self) -> bool:
        # A package with no interrupt needs no drain: its stages run beside the workloads.
        return self.interrupt.disruptive

    @property
    def needs_reboot(self) -> bool:
        return self.interrupt.kind is InterruptKind.REBOOT

    @property
    def interrupt_count(self) -> int:
        return sum(1 for step in self.steps if step.stage.is_interrupt)


@lru_cache(maxsize=4096)
def _version(text: str) -> semver.Version | None:
    try:
        return semver.Version.parse(text)
    except ValueError:
        return None


def _version_action(installed: str | None, wanted: str) -> Action | None:
    """install / upgrade / downgrade by semver; None when the versions are equal."""
    if installed is None:
        return Action.INSTALL
    old, new = _version(installed), _version(wanted)
    if old is None or new is None:
        # An unreadable recorded version cannot be compared: reinstall rather than guess.
        return None if installed == wanted else Action.INSTALL
    if new > old:
        return Action.UPGRADE
    if new < old:
        return Action.DOWNGRADE
    return None


_FIRST_STAGE = {
    Action.INSTALL: Stage.APPLY,
    Action.DOWNGRADE: Stage.APPLY,
    Action.UPGRADE: Stage.UPGRADE,
}


def _install_side(package: DesiredPackage, record: PackageRecord | None) -> PackageWork | None:
    if (
        record is not None
        and record.pending is None
        and record.version == package.version
        and record.config == package.config
    ):
        return None  # the common case on a converged node: no models built
    installed = record.version if record else None
    installed_config = record.config if record else {}
    action = _version_action(installed, package.version)
    keys = changed_keys(installed_config, package.config)
    if action is None and not keys:
        return None
    interrupts = [config_interrupt(keys, package.config_rules())]
    if action is not None:
        interrupts.append(package.interrupt)
    interrupt = merge(interrupts)
    first = (_FIRST_STAGE[action],) if action is not None else ()
    post = (Stage.INTERRUPT, Stage.POST_INTERRUPT) if interrupt.present else ()
    stages = (*first, Stage.CONFIG, *post)
    resumed = False
    pending = record.pending if record else None
    if pending is not None and pending.version == package.version and pending.config == package.config:
        stages = tuple(s for s in stages if s not in pending.done)
        resumed = True
    return PackageWork(
        package=package.name,
        action=action or Action.CONFIG,
        from_version=installed,
        to_version=package.version,
        stages=stages,
        changed_keys=keys,
        interrupt=interrupt,
        resumed=resumed,
    )


def _uninstall_side(package: DesiredPackage, record: PackageRecord | None) -> PackageWork | None:
    if record is None or (record.version is None and record.pending is None):
        return None
    stages: tuple[Stage, ...] = (Stage.UNINSTALL,)
    if package.interrupt.present:
        stages += (Stage.UNINSTALL_INTERRUPT,)
    pending = record.pending
    resumed = pending is not None and bool(pending.stages) and pending.stages[0] is Stage.UNINSTALL
    if resumed and pending is not None:
        stages = tuple(s for s in stages if s not in pending.done)
    return PackageWork(
        package=package.name,
        action=Action.UNINSTALL,
        from_version=record.version,
        stages=stages,
        interrupt=package.interrupt,
        resumed=resumed,
    )


def _failure(package: DesiredPackage, pending: PendingChange | None) -> str | None:
    if pending is None or pending.failed is None:
        return None
    same_target = pending.version == package.version and pending.config == package.config
    is_uninstall = bool(pending.stages) and pending.stages[0] is Stage.UNINSTALL
    if same_target or (package.uninstall and is_uninstall):
        return f"{package.name}: {pending.failed}"
    return None


def _assign_phases(
    graph: PackageGraph, works: dict[str, PackageWork], memo: PackageMemo
) -> dict[str, PackageWork]:
    """Phase 0 holds packages with no dependency that has work here; each later phase waits for the
    previous ones. Uninstalls phase in reverse: dependents are removed before their dependencies."""
    phase: dict[str, int] = {}
    for name in graph.order:
        work = works.get(name)
        if work is None or work.action is Action.UNINSTALL:
            continue
        deps = [phase[d] for d in graph.packages[name].depends_on if d in phase]
        phase[name] = 1 + max(deps) if deps else 0
    for name in reversed(graph.order):
        work = works.get(name)
        if work is None or work.action is not Action.UNINSTALL:
            continue
        users = [
            phase[u] for u in graph.dependents[name] if u in phase and works[u].action is Action.UNINSTALL
        ]
        phase[name] = 1 + max(users) if users else 0
    return {name: _phased(work, phase[name], memo) for name, work in works.items()}


def _phased(work: PackageWork, phase: int, memo: PackageMemo) -> PackageWork:
    if work.phase == phase:
        return work
    key = (id(work), phase)
    found = memo.phased.get(key)
    if found is None:
        found = memo.phased[key] = work.model_copy(update={"phase": phase})
    return found


def _work_steps(phase: int, work: PackageWork, memo: PackageMemo, post: bool) -> list[NodeStep]:
    """The stages of ``work`` before the interrupt, or its post-interrupt stage (``post``)."""
    key = (id(work), phase, Stage.POST_INTERRUPT if post else Stage.CONFIG)
    steps = memo.steps.get(key)
    if steps is None:
        wanted = [s for s in work.stages if (s is Stage.POST_INTERRUPT) == post and not s.is_interrupt]
        # model_construct: every value comes from validated models (this is the hot path).
        steps = [
            NodeStep.model_construct(phase=phase, stage=stage, packages=(work.package,), interrupt=None)
            for stage in wanted
        ]
        memo.steps[key] = steps
    return steps


def _interrupt_step(phase: int, interrupting: list[PackageWork], memo: PackageMemo) -> NodeStep:
    key = (phase, tuple(id(w) for w in interrupting))
    step = memo.interrupts.get(key)
    if step is None:
        only_uninstalls = all(w.action is Action.UNINSTALL for w in interrupting)
        stage = Stage.UNINSTALL_INTERRUPT if only_uninstalls else Stage.INTERRUPT
        # NodeWright runs the merged interrupt in the pod of the alphabetically first package.
        names = tuple(sorted(w.package for w in interrupting))
        merged = merge(w.interrupt for w in interrupting)
        step = memo.interrupts[key] = NodeStep.model_construct(
            phase=phase, stage=stage, packages=names, interrupt=merged
        )
    return step


def _phase_steps(phase: int, works: list[PackageWork], memo: PackageMemo) -> list[NodeStep]:
    steps: list[NodeStep] = []
    # Uninstalls first (they only remove), then installs in dependency order.
    ordered = sorted(works, key=lambda w: w.action is not Action.UNINSTALL)
    for work in ordered:
        steps.extend(_work_steps(phase, work, memo, post=False))
    interrupting = [w for w in ordered if any(s.is_interrupt for s in w.stages)]
    if interrupting:
        steps.append(_interrupt_step(phase, interrupting, memo))
    for work in ordered:
        steps.extend(_work_steps(phase, work, memo, post=True))
    return steps


def _blocked(graph: PackageGraph, works: Mapping[str, PackageWork]) -> list[BlockedPackage]:
    blocked = []
    for name, work in works.items():
        if work.action is Action.UNINSTALL:
            continue
        gone = [d for d in graph.packages[name].depends_on if graph.packages[d].uninstall]
        if gone:
            blocked.append(BlockedPackage(package=name, reason=f"DependencyUninstalled: {', '.join(gone)}"))
    return blocked


class PackageMemo:
    """Values shared by the nodes of one fleet planned against one graph: the work per distinct
    (package, record), its copy per phase, and the steps built from them. A fleet has few distinct
    ones, so building each once is what makes 10,000 nodes cheap. Keys by ``id`` are safe: the memo
    keeps every keyed object alive."""

    def __init__(self) -> None:
        self.works: dict[tuple[str, Hashable], PackageWork | None] = {}
        self.phased: dict[tuple[int, int], PackageWork] = {}
        self.steps: dict[tuple[int, int, Stage], list[NodeStep]] = {}
        self.interrupts: dict[tuple[int, tuple[int, ...]], NodeStep] = {}


def _package_work(
    package: DesiredPackage, record: PackageRecord | None, memo: PackageMemo
) -> PackageWork | None:
    key = (package.name, record_key(record))
    if key in memo.works:
        return memo.works[key]
    work = _uninstall_side(package, record) if package.uninstall else _install_side(package, record)
    if work is not None and not work.stages:
        work = None
    memo.works[key] = work
    return work


def plan_node(
    graph: PackageGraph, records: Mapping[str, PackageRecord], memo: PackageMemo | None = None
) -> NodeWork:
    """The work a node with the recorded state ``records`` needs to reach ``graph``'s desired state.
    ``memo`` may be shared across the nodes of one fleet (and one ``graph``) to plan each distinct
    package state once.

    Packages recorded on the node but absent from the profile are left in place: removing a package
    takes an explicit ``uninstall``, never an edit that drops it from a list."""
    memo = memo if memo is not None else PackageMemo()
    works: dict[str, PackageWork] = {}
    failures: list[str] = []
    for name in graph.order:
        package = graph.packages[name]
        record = records.get(name)
        work = _package_work(package, record, memo)
        if work is None:
            continue
        works[name] = work
        failure = _failure(package, record.pending if record else None)
        if failure is not None:
            failures.append(failure)
    blocked = _blocked(graph, works)
    for item in blocked:
        del works[item.package]
    works = _assign_phases(graph, works, memo)
    ordered = [works[name] for name in _work_order(graph, works)]
    steps: list[NodeStep] = []
    for phase in sorted({w.phase for w in ordered}):
        steps.extend(_phase_steps(phase, [w for w in ordered if w.phase == phase], memo))
    # model_construct: every value here was built from validated models (this is the hot path).
    return NodeWork.model_construct(
        packages=tuple(ordered),
        steps=tuple(steps),
        blocked=tuple(blocked),
        failed="; ".join(failures) or None,
    )


def _work_order(graph: PackageGraph, works: Mapping[str, PackageWork]) -> Iterable[str]:
    position = graph.position
    return sorted(works, key=lambda n: (works[n].phase, works[n].action is not Action.UNINSTALL, position[n]))
