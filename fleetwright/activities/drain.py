"""Draining a node through the Eviction API: which pods go, which stay, what blocks, and the pass loop.

Rules (kubectl drain parity plus NodeWright's): DaemonSet-owned, mirror (static) and finished pods
stay; pods tolerating ``node.kubernetes.io/unschedulable`` stay (they would land right back);
fleetwright's own package pods stay, recognised by label *and* namespace (a label alone is not
proof, NodeWright #296). Unmanaged pods go only with ``force``; emptyDir pods only with
``deleteEmptyDirData``; otherwise they block, visibly.

Every pass re-lists the node's pods. A PDB refusal (429) is a wait state, a 500 for several budgets
is a blocked reason, API throttling backs off honouring Retry-After. The drain is done only when
every pod it had to remove is gone (or was replaced under a new UID), never when evictions were
merely accepted. It must not cordon (the cordon comes first, from its own activity).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from enum import StrEnum

from temporalio.exceptions import ApplicationError

from fleetwright.activities import nodeprogress
from fleetwright.activities.payloads import DrainReport, DrainRequest, NodePhase
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window, tell_rollout
from fleetwright.api.keys import NodeReason
from fleetwright.api.nodeprofile import DrainSpec
from fleetwright.kube import pods
from fleetwright.kube.client import ApiClient
from fleetwright.kube.eviction import EvictionResult, evict
from fleetwright.kube.pods import PodFacts

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_US = "fleetwright"
# Waiting states a drain writes onto the profile's condition; cleared when the drain ends.
DRAIN_WAIT_REASONS = frozenset({NodeReason.DRAIN_BLOCKED, NodeReason.DRAIN_TIMEOUT})
DEFAULT_RETRY_AFTER_SECONDS = 5.0
PDB_REASONS = frozenset({"PodDisruptionBudget", "MultiplePodDisruptionBudgets"})


class Verdict(StrEnum):
    EVICT = "evict"
    SKIP = "skip"
    BLOCK = "block"


@dataclass(frozen=True)
class Disposition:
    verdict: Verdict
    reason: str = ""


def _ours(pod: PodFacts, package_namespace: str) -> bool:
    return pod.namespace == package_namespace and pod.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_US


def disposition(pod: PodFacts, drain: DrainSpec, package_namespace: str) -> Disposition:
    """What the drain does with ``pod`` (pure). The first matching rule wins."""
    rules: tuple[tuple[bool, Verdict, str], ...] = (
        (pod.phase in ("Succeeded", "Failed"), Verdict.SKIP, "Finished"),
        (pod.mirror, Verdict.SKIP, "MirrorPod"),
        (pod.controller_kind == "DaemonSet", Verdict.SKIP, "DaemonSet"),
        (_ours(pod, package_namespace), Verdict.SKIP, "FleetwrightPackagePod"),
        (pod.tolerates_unschedulable, Verdict.SKIP, "ToleratesUnschedulable"),
        (pod.controller_kind is None and not drain.force, Verdict.BLOCK, "UnmanagedPod"),
        (pod.uses_empty_dir and not drain.delete_empty_dir_data, Verdict.BLOCK, "EmptyDirData"),
    )
    for matches, verdict, reason in rules:
        if matches:
            return Disposition(verdict, reason)
    return Disposition(Verdict.EVICT)


@dataclass(frozen=True)
class Blocker:
    pod: str
    reason: str
    """``PodDisruptionBudget``, ``MultiplePodDisruptionBudgets``, ``UnmanagedPod`` or ``EmptyDirData``."""
    message: str = ""

    def describe(self) -> str:
        return f"{self.pod}: {self.reason}" + (f" ({self.message})" if self.message else "")


def blocked_message(blockers: Iterable[Blocker]) -> str:
    """One line naming every blocking pod, its reason and the apiserver's words (verbatim)."""
    return "; ".join(b.describe() for b in sorted(blockers, key=lambda b: b.pod))


@dataclass
class Pass:
    """What one pass over the node's pods found and did."""

    skipped: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)
    """Pods that must go (key -> uid), including those already terminating."""
    blockers: list[Blocker] = field(default_factory=list)
    throttled: bool = False


class Drainer:
    """One drain of one node; state lives here and in the heartbeat details."""

    def __init__(self, api: ApiClient, executor: Executor, request: DrainRequest) -> None:
        self.api, self.executor, self.request = api, executor, request
        self.clock = Clock()
        self.evicted: dict[str, str] = dict(self.clock.prior.get("evicting") or {})
        self.blocked_seconds = float(self.clock.prior.get("blocked_seconds") or 0.0)
        self.evict_after = 0.0  # monotonic time before which the apiserver asked us not to evict
        self.shown: tuple[str, str] | None = None  # the last (reason, message) made visible

    async def run(self) -> DrainReport:
        window = min(heartbeat_window(), max(1.0, self.request.poll_seconds))
        while True:
            listed, version = await blocking(self.executor, pods.pods_on_node, self.api, self.request.node)
            outcome = await self._pass(listed)
            if not outcome.pending and not outcome.blockers:
                await self._clear()
                return self._report(listed, outcome)
            await self._show(outcome)
            self._beat(outcome)
            waited = await self._pause(outcome, version, window)
            if any(b.reason in PDB_REASONS for b in outcome.blockers):
                self.blocked_seconds += waited

    async def _pass(self, listed: list[PodFacts]) -> Pass:
        outcome = Pass()
        for pod in listed:
            verdict = disposition(pod, self.request.drain, self.request.package_namespace)
            if verdict.verdict is Verdict.SKIP:
                outcome.skipped.append(pod.key)
            elif verdict.verdict is Verdict.BLOCK:
                outcome.blockers.append(Blocker(pod.key, verdict.reason))
            else:
                outcome.pending[pod.key] = pod.uid
        for pod in listed:
            if pod.key in outcome.pending and not pod.terminating and self._may_evict(outcome):
                await self._remove(pod, outcome)
        return outcome

    def _may_evict(self, outcome: Pass) -> bool:
        return not outcome.throttled and time.monotonic() >= self.evict_after

    async def _remove(self, pod: PodFacts, outcome: Pass) -> None:
        drain = self.request.drain
        if drain.disable_eviction:
            await blocking(
                self.executor,
                pods.delete_pod,
                self.api,
                pod.namespace,
                pod.name,
                grace_period_seconds=drain.grace_period_seconds,
            )
            self.evicted[pod.key] = pod.uid
            return
        result = await blocking(
            self.executor,
            evict,
            self.api,
            pod.namespace,
            pod.name,
            grace_period_seconds=drain.grace_period_seconds,
        )
        if result.result in (EvictionResult.ACCEPTED, EvictionResult.GONE):
            self.evicted[pod.key] = pod.uid
        elif result.result is EvictionResult.BLOCKED_BY_PDB:
            outcome.blockers.append(Blocker(pod.key, "PodDisruptionBudget", result.message))
        elif result.result is EvictionResult.MULTIPLE_PDBS:
            outcome.blockers.append(Blocker(pod.key, "MultiplePodDisruptionBudgets", result.message))
        elif result.result is EvictionResult.THROTTLED:
            outcome.throttled = True
            delay = float(result.retry_after_seconds or DEFAULT_RETRY_AFTER_SECONDS)
            self.evict_after = time.monotonic() + delay
        # NamespaceTerminating: the namespace deletion removes the pod; keep waiting for it.

    async def _pause(self, outcome: Pass, version: str, window: float) -> float:
        """Wait before the next pass; returns the seconds waited."""
        started = self.clock.elapsed()
        if outcome.blockers or outcome.throttled:
            # Refused evictions are retried on a timer (a PDB relaxing changes no pod on this node);
            # a throttled apiserver's Retry-After gates the next eviction, not the heartbeats.
            await asyncio.sleep(min(self.request.poll_seconds, window))
        else:
            await blocking(
                self.executor, pods.wait_for_node_pods, self.api, self.request.node, version, window
            )
        return self.clock.elapsed() - started

    async def _show(self, outcome: Pass) -> None:
        """Make a block visible (condition + one event per distinct message); enforce the bound."""
        timed_out = self.clock.elapsed() >= self.request.drain.timeout_seconds
        if not outcome.blockers and not timed_out:
            return
        names = blocked_message(outcome.blockers) or "waiting for evicted pods to go: " + ", ".join(
            sorted(outcome.pending)
        )
        reason = NodeReason.DRAIN_TIMEOUT if timed_out else NodeReason.DRAIN_BLOCKED
        message = f"drain of {self.request.node}: {names}"
        if timed_out:
            message = f"drain timed out after {self.request.drain.timeout_seconds}s; {message}"
        if (reason, message) != self.shown:
            await nodeprogress.show(
                self.executor, self.api, self.request, phase=NodePhase.BLOCKED, reason=reason, message=message
            )
            await tell_rollout(self.request.rollout_workflow_id)
            self.shown = (reason, message)
        if timed_out and self.request.drain.on_timeout == "fail-node":
            raise ApplicationError(message, type=NodeReason.DRAIN_TIMEOUT, non_retryable=True)

    def _beat(self, outcome: Pass) -> None:
        self.clock.beat(
            evicting=self.evicted,
            blocked_seconds=self.blocked_seconds,
            waiting_for=sorted(outcome.pending),
            blocked=[b.describe() for b in outcome.blockers],
        )

    async def _clear(self) -> None:
        """A drain that ends lifts the waiting state it may have shown (this or an earlier attempt)."""
        if await nodeprogress.lift(
            self.executor,
            self.api,
            self.request,
            held=DRAIN_WAIT_REASONS,
            reason=NodeReason.DRAINED,
            message=f"drain of {self.request.node} finished",
        ):
            await tell_rollout(self.request.rollout_workflow_id)

    def _report(self, listed: list[PodFacts], outcome: Pass) -> DrainReport:
        present = {p.key: p.uid for p in listed}
        gone = sorted(k for k, uid in self.evicted.items() if present.get(k) != uid)
        return DrainReport(
            evicted=tuple(gone), skipped=tuple(sorted(outcome.skipped)), blocked_seconds=self.blocked_seconds
        )
