"""A hardware-suspect node's quarantine, inside its node workflow: once its gate failed again on
the version a rollback returned it to (and the node workflow showed it Failed ``HardwareSuspect``
and reported to its rollout), the node rests ``quarantine_regate_seconds`` (300 by default)
cordoned, then runs its
node gate again by itself (``GateRun`` with ``rerun``: validations, checks on their own schedule,
external verdicts), and again after each run that does not pass (the pause doubling up to
``REGATE_PAUSE_MAX_SECONDS``), until one passes (the node
workflow then lifts its cordon: back in service) or the quarantine is ended
(``END_QUARANTINE_SIGNAL``: a human released the node, or a new pass over it starts). Every run
is activities in the node workflow's history, its status stays ``HardwareSuspect`` naming the run
and what it found, and the Temporal UI's details say when the next run begins.

Owns that loop and its statuses; the gate's rules are ``nodegate``'s, the cordon the node
workflow's. Orchestration only: every side effect is an activity.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow

from fleetwright.workflows.nodeerrors import GateFailedError
from fleetwright.workflows.nodegate import GateRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.payloads import NodePhase, StatusNote
    from fleetwright.api.keys import NodeReason
    from fleetwright.workflows.payloads import NodeInput

REGATE_PAUSE_MAX_SECONDS = 3600
"""The pause (``EngineSettings.quarantine_regate_seconds`` first: 300 s by default, long enough for
a GPU series to settle, short enough that a node whose fault cleared is back within minutes)
doubles after each run that did not pass, up to this: a node that stays bad for weeks costs its
workflow history about 24 runs a day, not 288 (a node workflow never continues as new)."""


def pause_before(run: int, first: int) -> int:
    """Seconds a quarantined node rests before its gate's run ``run`` (1, 2, ...), ``first``
    before the first."""
    doubled: int = first << min(run - 1, 8)
    return min(doubled, max(first, REGATE_PAUSE_MAX_SECONDS))


class Quarantine:
    """The re-gating of one hardware-suspect node. ``ended`` reads the end of the quarantine,
    ``show`` publishes a node status (an activity) and ``at`` names the workflow's stage."""

    def __init__(
        self,
        node_input: NodeInput,
        *,
        ended: Callable[[], bool],
        show: Callable[[StatusNote], Awaitable[None]],
        at: Callable[[str], None],
    ) -> None:
        self._input = node_input
        self._ended = ended
        self._show = show
        self._at = at
        self.runs = 0

    async def regate(self, failure: str) -> str | None:
        """Run the gate after each pause (``pause_before``) until it passes: its summary then, None
        once the quarantine was ended first."""
        while True:
            if not await self._rest(failure):
                return None
            self.runs += 1
            gate = GateRun(self._input, aborted=self._ended, show=self._suspect, at=self._at, rerun=self.runs)
            await self._suspect(
                StatusNote(phase=NodePhase.FAILED, reason=NodeReason.HARDWARE_SUSPECT, message="running")
            )
            try:
                await gate.run()
            except GateFailedError as failed:
                if self._ended():
                    return None
                failure = str(failed)
                await self._suspect(
                    StatusNote(phase=NodePhase.FAILED, reason=NodeReason.HARDWARE_SUSPECT, message=failure)
                )
                continue
            workflow.set_current_details("")
            return f"health gate run {self.runs} in quarantine passed: {gate.summary()}"

    async def _rest(self, failure: str) -> bool:
        """Wait cordoned until the next run (True), or the end of the quarantine (False)."""
        self._at("quarantine")
        node, profile = self._input.node, self._input.profile
        pause = self._pause(self.runs + 1)
        workflow.set_current_details(
            f"hardware suspect: {failure}; the health gate runs again in {pause}s "
            f"(run {self.runs + 1}), or `fleetwright release {profile} {node}`"
        )
        try:
            await workflow.wait_condition(
                self._ended,
                timeout=timedelta(seconds=pause),
                timeout_summary=f"re-gate {node} (run {self.runs + 1})",
            )
        except TimeoutError:
            return True
        return False

    def _pause(self, run: int) -> int:
        return pause_before(run, self._input.settings.quarantine_regate_seconds)

    async def _suspect(self, note: StatusNote) -> None:
        """``note`` (a gate's status) shown as the quarantined node's: Failed, HardwareSuspect,
        naming the run, so the node takes no work and its gauge stays until a run passes."""
        node, profile = self._input.node, self._input.profile
        message = (
            f"hardware suspect, health gate run {self.runs} in quarantine (next in "
            f"{self._pause(self.runs + 1)}s unless it passes, or `fleetwright release {profile} {node}`): "
            f"{note.message}"
        )
        await self._show(
            StatusNote(phase=NodePhase.FAILED, reason=NodeReason.HARDWARE_SUSPECT, message=message)
        )
