"""Runs chaos iterations: for each, a fresh node group with training gangs on it and a fresh rollout
of a profile with the plan's policy, the plan's faults injected at their moments while the watcher
records everything, then the invariant checks over the recorded timeline and a clean-up of the
group.

Owns the sequence of one iteration and the totals of a run; the faults, the watcher and the checks
are their own modules.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from fleetwright.chaos.faults import Injected, Injector
from fleetwright.chaos.invariants import FINAL_PHASES, Violation, check_run, left_behind
from fleetwright.chaos.iteration import Fault, IterationPlan, Outcome
from fleetwright.chaos.snapshot import Snapshot
from fleetwright.chaos.system import GROUP_LABEL, ChaosStack
from fleetwright.chaos.watcher import Watcher
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local import examples
from fleetwright.local.nodes import OUTCOME_LABEL, stage_pod_timing
from fleetwright.workflows.enginesettings import EngineSettings

STAGE_POD_ANNOTATIONS = stage_pod_timing(0.5, ready_seconds=0.1)
IMAGE_PULL_TIMEOUT_SECONDS = 60
SETTLE_SECONDS = 2.0
SETTLED_WITHIN_SECONDS = 30.0
# The heartbeat timeout of an iteration that kills the worker: its heartbeating activities (a drain,
# a stage, a reboot) resume on the new worker within seconds, not the default half-minute.
KILLED_WORKER_HEARTBEAT_SECONDS = 10
# How long a third party keeps its cordon: with maxUnavailable 1 the rollout waits (Blocked, with
# the budget as its reason) until the cordon goes, as it must.
FOREIGN_CORDON_HOLD_SECONDS = 20.0
# The pod label naming an iteration's training gangs (its policy's ``workloadLabel``).
GANG_LABEL = "chaos.fleetwright.io/gang"


@dataclass(frozen=True)
class IterationResult:
    plan: IterationPlan
    profile: str
    phase: str
    seconds: float
    injected: tuple[Injected, ...]
    violations: tuple[Violation, ...]
    snapshots: int
    failed_reads: int
    revived: tuple[str, ...] = ()
    """Processes that exited on their own and were started again (as the kubelet would)."""
    final: Snapshot | None = None
    """The last snapshot, read after the rollout ended."""

    @property
    def completed(self) -> bool:
        return self.phase in ("Complete", "Degraded")

    @property
    def halted(self) -> bool:
        return self.phase == "Halted"

    @property
    def rolled_back(self) -> bool:
        return self.phase == "RolledBack"


@dataclass
class Totals:
    iterations: int = 0
    completed: int = 0
    halted: int = 0
    rolled_back: int = 0
    violations: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    revived: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, result: IterationResult) -> None:
        self.iterations += 1
        self.completed += result.completed
        self.halted += result.halted
        self.rolled_back += result.rolled_back
        self.violations += len(result.violations)
        self.faults.update(i.fault.value for i in result.injected)
        self.revived.update(result.revived)
        self.seconds += result.seconds


def engine_settings(plan: IterationPlan) -> EngineSettings:
    labels = {} if plan.outcome is Outcome.SUCCEED else {OUTCOME_LABEL: plan.outcome.value}
    return EngineSettings(
        observe_interval_seconds=2,
        # A terminated node workflow (a fault of its own) is noticed within seconds, not minutes.
        ended_check_seconds=2,
        stage_pod_annotations=STAGE_POD_ANNOTATIONS,
        stage_pod_labels=labels,
        # A failing stage Job fails ``stage_failures`` pods (its whole backoff budget) before it fails.
        stage_backoff_limit=plan.stage_failures - 1 if plan.outcome is Outcome.FAIL else 0,
        drain_poll_seconds=0.5,
        reboot_timeout_seconds=120,
        image_pull_timeout_seconds=IMAGE_PULL_TIMEOUT_SECONDS,
        **_killed_worker_heartbeat(plan),
    )


def _killed_worker_heartbeat(plan: IterationPlan) -> dict[str, int]:
    """The short heartbeat timeout for a plan that kills the worker; none (the default) otherwise,
    so the upgrade test's previous release, which does not know the setting, never sees it."""
    if any(injection.fault is Fault.KILL_WORKER for injection in plan.injections):
        return {"heartbeat_timeout_seconds": KILLED_WORKER_HEARTBEAT_SECONDS}
    return {}


# A rollback iteration's second spec: its config stage fails on every node of the simulated fleet
# (the stage named by the package's SIM_FAIL_STAGE env fails, stages.yaml).
FAILING_VERSION = "1.1.0"
FAILING_ENV = {"name": "SIM_FAIL_STAGE", "value": "config"}


def gangs(nodes: list[str], plan: IterationPlan) -> dict[str, list[str]]:
    """The training gangs an iteration places: its nodes in name order (a rack's nodes are
    consecutive) cut into gangs of up to ``maxUnavailable`` nodes (at most 3), the last node left
    idle. None for a rollback iteration: its two rollouts would each interrupt them once."""
    if plan.rollback or len(nodes) < 2:
        return {}
    size = max(1, min(plan.max_unavailable, 3))
    placed = sorted(nodes)[:-1]
    return {f"gang-{i // size}": placed[i : i + size] for i in range(0, len(placed), size)}


def workload_manifests(name: str, placed: dict[str, list[str]]) -> str:
    """A namespace named like the iteration and one training Job per gang node."""
    items: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}]
    for gang, nodes in sorted(placed.items()):
        for index, node in enumerate(nodes):
            items.append(examples.training_job(f"{gang}-{index}", name, node, labels={GANG_LABEL: gang}))
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def manifests(
    name: str, plan: IterationPlan, *, failing: bool = False, workload_label: str | None = None
) -> str:
    """The iteration's policy and profile; ``failing``: a rollback iteration's second spec;
    ``workload_label``: the policy's (set only with gangs placed, so the manifests stay the
    previous release's for the upgrade test)."""
    profile = examples.profile(
        name,
        interrupt=plan.interrupt,
        selector={GROUP_LABEL: name},
        policy=name,
        version=FAILING_VERSION if failing else "1.0.0",
    )
    if failing:
        package = profile.spec.packages[0].model_validate(
            {**profile.spec.packages[0].model_dump(by_alias=True), "env": [FAILING_ENV]}
        )
        profile = profile.model_copy(update={"spec": profile.spec.model_copy(update={"packages": [package]})})
    policy = examples.policy(
        name,
        max_unavailable=plan.max_unavailable,
        steps=list(plan.steps),
        max_failed_nodes=plan.max_failed_nodes,
        workload_label=workload_label,
    )
    if plan.rollback:
        failure = policy.spec.failure.model_copy(update={"action": "rollback"})
        policy = policy.model_copy(update={"spec": policy.spec.model_copy(update={"failure": failure})})
    items: list[dict[str, Any]] = []
    for model in (policy, profile):
        body = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        body.pop("status", None)
        body["metadata"] = {"name": name}  # the apiserver owns uid and generation
        items.append(body)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


class Iteration:
    def __init__(self, stack: ChaosStack, plan: IterationPlan, deadline_seconds: float) -> None:
        self.stack, self.plan = stack, plan
        # A rollback iteration has its own name: it shares seed and index with a drawn iteration of
        # the same run, whose profile, nodes and Jobs it must not be counted with.
        kind = "rb-" if plan.rollback else ""
        self.name = f"chaos-{kind}{plan.seed % 100000}-{plan.index}"
        self.deadline = deadline_seconds + sum(i.pause for i in plan.injections)
        self.injected: list[Injected] = []
        self.released: dict[str, float] = {}
        self.revived: list[str] = []

    def run(self) -> IterationResult:
        started = time.monotonic()
        self.stack.configure(engine_settings(self.plan))
        placed = gangs(self.stack.add_group(self.name, self.plan.nodes), self.plan)
        if placed:
            self.stack.cluster.kubectl("apply", "-f", "-", input=workload_manifests(self.name, placed))
        watcher = Watcher(
            from_kubeconfig(self.stack.cluster.kubeconfig), self.name, f"{GROUP_LABEL}={self.name}"
        )
        try:
            with watcher:
                label = GANG_LABEL if placed else None
                applied = manifests(self.name, self.plan, workload_label=label)
                self.stack.cluster.kubectl("apply", "-f", "-", input=applied)
                if self.plan.rollback:
                    # The failing spec replaces a complete one: the injections land in its rollback.
                    self._await_phase(watcher, "Complete")
                    failing = manifests(self.name, self.plan, failing=True)
                    self.stack.cluster.kubectl("apply", "-f", "-", input=failing)
                # On this thread: a child started from a thread that ends would die with it
                # (the launcher's PR_SET_PDEATHSIG is per thread).
                self._inject(watcher, watcher.now())
                self._release_cordons(watcher)
                self._wait_final(watcher, started)
            time.sleep(SETTLE_SECONDS)
            final = self._await_settled(watcher)
            outages = [i.outage for i in self.injected if i.outage is not None]
            workloads = {f"{GANG_LABEL}/{self.name}/{g}": frozenset(n) for g, n in placed.items()}
            violations = check_run(
                watcher.timeline,
                self.name,
                self.plan.max_unavailable,
                outages,
                self.released,
                workloads=workloads,
            )
        finally:
            self._clean_up()
        return IterationResult(
            plan=self.plan,
            profile=self.name,
            phase=final.profile.phase if final.profile else "",
            seconds=time.monotonic() - started,
            injected=tuple(self.injected),
            violations=tuple(violations),
            snapshots=len(watcher.timeline),
            failed_reads=watcher.failed_reads,
            revived=tuple(self.revived),
            final=final,
        )

    def _inject(self, watcher: Watcher, applied: float) -> None:
        rng = random.Random(f"{self.plan.seed}/{self.plan.index}/targets")  # noqa: S311 - reproducible
        injector = Injector(self.stack, self.name, watcher.now)
        for injection in self.plan.injections:
            self._pause(applied + injection.at - watcher.now())
            self._await_jobs(watcher, injection.after_jobs)
            if injection.after_phase:
                self._await_phase(watcher, injection.after_phase)
            # The latest snapshot (read now if the watcher has none yet) says which nodes exist.
            latest = watcher.timeline[-1] if watcher.timeline else watcher.final()
            injected = injector.inject(injection, latest.nodes, rng)
            self.injected.append(replace(injected, jobs_before=self._jobs(latest)))

    def _await_jobs(self, watcher: Watcher, count: int) -> None:
        """Until the watcher has seen ``count`` stage Jobs of the rollout (or the deadline)."""
        started = time.monotonic()
        while count and time.monotonic() - started < self.deadline:
            if watcher.timeline and self._jobs(watcher.timeline[-1]) >= count:
                return
            self._pause(0.2)

    def _await_phase(self, watcher: Watcher, phase: str) -> None:
        """Until the watcher has seen the NodeProfile in ``phase`` for its current generation (or
        the deadline)."""
        started = time.monotonic()
        while time.monotonic() - started < self.deadline:
            profile = watcher.timeline[-1].profile if watcher.timeline else None
            if profile and profile.phase == phase and profile.observed_generation == profile.generation:
                return
            self._pause(0.2)

    def _jobs(self, snap: Snapshot) -> int:
        return sum(1 for job in snap.jobs if job.profile == self.name)

    def _release_cordons(self, watcher: Watcher) -> None:
        injector = Injector(self.stack, self.name, watcher.now)
        for injected in self.injected:
            if injected.fault is Fault.FOREIGN_CORDON and injected.target:
                self._pause(injected.at + FOREIGN_CORDON_HOLD_SECONDS - watcher.now())
                self.released[injected.target] = injector.release(injected.target)

    def _pause(self, seconds: float) -> None:
        """Sleep, restarting a worker or controller that exited on its own meanwhile."""
        until = time.monotonic() + max(0.0, seconds)
        while True:
            self.revived += self.stack.supervise()
            left = until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.5, left))

    def _await_settled(self, watcher: Watcher) -> Snapshot:
        """The last snapshot. Every final phase but a halt comes only once each node workflow of the
        rollout reported, after lifting its cordon and taint (docs/chaos.md): that snapshot is taken
        at once. A halt turns the phase final while the node workflows it started still run: after
        one it is taken once nothing of the rollout is left on the nodes, or after
        ``SETTLED_WITHIN_SECONDS``, so a node still cordoned after the limit is a violation."""
        final = watcher.final()
        if final.profile is None or final.profile.phase != "Halted":
            return final
        limit = time.monotonic() + SETTLED_WITHIN_SECONDS
        while left_behind(final, self.name) and time.monotonic() < limit:
            self._pause(1.0)
            final = watcher.final()
        return final

    def _wait_final(self, watcher: Watcher, started: float) -> None:
        while time.monotonic() - started < self.deadline:
            last = watcher.timeline[-1] if watcher.timeline else None
            profile = last.profile if last else None
            if (
                profile
                and profile.phase in FINAL_PHASES
                and profile.observed_generation == profile.generation
            ):
                return
            self._pause(0.5)

    def _clean_up(self) -> None:
        kubectl = self.stack.cluster.kubectl
        kubectl(
            "delete",
            "nodeprofile,deploymentpolicy",
            self.name,
            "--ignore-not-found",
            "--wait=false",
            check=False,
        )
        self.stack.remove_group(self.name)
        kubectl("delete", "namespace", self.name, "--ignore-not-found", "--wait=false", check=False)


def run(
    stack: ChaosStack,
    plans: list[IterationPlan],
    *,
    deadline_seconds: float = 240.0,
    report: Callable[[IterationResult], None] = lambda _: None,
    stop_after_seconds: float | None = None,
) -> Totals:
    """Run ``plans`` in order; with ``stop_after_seconds``, start no iteration after that long."""
    totals = Totals()
    started = time.monotonic()
    for plan in plans:
        if stop_after_seconds is not None and time.monotonic() - started > stop_after_seconds:
            break
        result = Iteration(stack, plan, deadline_seconds).run()
        totals.add(result)
        report(result)
    return totals
