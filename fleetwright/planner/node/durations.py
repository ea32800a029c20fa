"""Duration estimates: how long a node's work is expected to take, from per-stage estimates.

Used for the ETA of a plan and for maintenance windows (a node starts only if its expected
duration fits the rest of the window). Estimates, not timeouts: the engine enforces timeouts.
"""

from __future__ import annotations

from fleetwright.api.compat import added_fields
from fleetwright.planner.base import Frozen
from fleetwright.planner.node.interrupts import InterruptKind
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.work import NodeWork


class StageDurations(Frozen):
    """Seconds per stage (including its check), per interrupt kind, and per node overhead."""

    apply: int = 120
    upgrade: int = 120
    config: int = 30
    post_interrupt: int = 60
    uninstall: int = 60
    reboot: int = 600
    restart_all_services: int = 120
    service: int = 60
    drain: int = 300
    """Cordon, wait for protected pods and drain; only for nodes that need an interrupt."""
    overhead: int = 30
    """Per node: scheduling the stage Jobs, recording state, uncordon."""
    gate: int = 0
    """The node gate, after a node's stages (its longest check when every measurement passes);
    0 without one."""
    _since_0_1_0 = added_fields("gate")

    def stage(self, stage: Stage) -> int:
        return {
            Stage.APPLY: self.apply,
            Stage.UPGRADE: self.upgrade,
            Stage.CONFIG: self.config,
            Stage.POST_INTERRUPT: self.post_interrupt,
            Stage.UNINSTALL: self.uninstall,
        }.get(stage, 0)

    def interrupt(self, kind: InterruptKind) -> int:
        return {
            InterruptKind.REBOOT: self.reboot,
            InterruptKind.RESTART_ALL_SERVICES: self.restart_all_services,
            InterruptKind.SERVICE: self.service,
        }.get(kind, 0)

    def node_seconds(self, work: NodeWork) -> int:
        """Expected wall time of all of ``work`` on one node (stages run one after the other)."""
        if not work.needs_work:
            return 0
        total = self.overhead + (self.drain if work.needs_drain else 0) + (self.gate if work.steps else 0)
        for step in work.steps:
            if step.interrupt is not None:
                total += self.interrupt(step.interrupt.kind)
            else:
                total += self.stage(step.stage)
        return total
