"""The pre-drain barrier of ``podNonInterruptLabels``: wait while a Running or Pending pod on the
node matches the selector (an empty selector matches none), visibly and within a bound.

While held, the profile's condition reads ``NonInterruptPodsRunning`` naming the pods, the summary
label reads ``Blocked`` and one Warning event names them (NodeWright #542 emitted nothing). The
bound counts from the first attempt; ``timeout_seconds`` of 0 or less waits with the visible reason
only. It must not cordon or drain (the node workflow orders those around it).
"""

from __future__ import annotations

from concurrent.futures import Executor

from temporalio.exceptions import ApplicationError

from fleetwright.activities import nodeprogress
from fleetwright.activities.payloads import NodePhase, ProtectedPodsRequest
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window, tell_rollout
from fleetwright.api.keys import NodeReason
from fleetwright.kube import pods
from fleetwright.kube.client import ApiClient

HOLDING_PHASES = frozenset({"Running", "Pending"})


class ProtectedPodsWait:
    def __init__(self, api: ApiClient, executor: Executor, request: ProtectedPodsRequest) -> None:
        self.api, self.executor, self.request = api, executor, request
        self.selector = pods.selector_string(request.selector)
        self.clock = Clock()
        self.shown = ""

    async def run(self) -> None:
        if self.request.selector.is_empty():
            return
        window = heartbeat_window()
        while True:
            held, version = await self._held()
            if not held:
                await self._release()
                return
            message = f"waiting for protected pods ({self.selector}) to finish: {', '.join(held)}"
            self._enforce_bound(message)
            await self._show(message)
            self.clock.beat(held=held)
            await blocking(
                self.executor,
                pods.wait_for_node_pods,
                self.api,
                self.request.node,
                version,
                self._window(window),
                label_selector=self.selector,
            )

    async def _held(self) -> tuple[list[str], str]:
        listed, version = await blocking(
            self.executor, pods.pods_on_node, self.api, self.request.node, label_selector=self.selector
        )
        return sorted(p.key for p in listed if p.phase in HOLDING_PHASES), version

    def _bounded(self) -> bool:
        return self.request.timeout_seconds > 0

    def _window(self, window: float) -> float:
        if not self._bounded():
            return window
        return max(1.0, min(window, self.request.timeout_seconds - self.clock.elapsed()))

    def _enforce_bound(self, message: str) -> None:
        if self._bounded() and self.clock.elapsed() >= self.request.timeout_seconds:
            raise ApplicationError(
                f"{message}; gave up after {self.request.timeout_seconds}s",
                type=NodeReason.PROTECTED_PODS_TIMEOUT,
                non_retryable=True,
            )

    async def _show(self, message: str) -> None:
        if message != self.shown:
            await nodeprogress.show(
                self.executor,
                self.api,
                self.request,
                phase=NodePhase.BLOCKED,
                reason=NodeReason.PROTECTED_PODS_RUNNING,
                message=message,
            )
            await tell_rollout(self.request.rollout_workflow_id)
            self.shown = message

    async def _release(self) -> None:
        """Lift the held state this (or an earlier) attempt showed; say nothing if none was shown."""
        if await nodeprogress.lift(
            self.executor,
            self.api,
            self.request,
            held=(NodeReason.PROTECTED_PODS_RUNNING,),
            reason=NodeReason.PROTECTED_PODS_GONE,
            message="protected pods are gone",
        ):
            await tell_rollout(self.request.rollout_workflow_id)
