"""Stage names of the per-package lifecycle on a node and the action a change is.

Stages: ``apply`` | ``upgrade`` -> ``config`` -> (``interrupt`` -> ``post-interrupt``);
``uninstall`` (-> ``uninstall-interrupt``). Every stage but the interrupts is followed by its
``<stage>-check``; ``post-interrupt`` verifies the interrupt.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    APPLY = "apply"
    UPGRADE = "upgrade"
    CONFIG = "config"
    INTERRUPT = "interrupt"
    POST_INTERRUPT = "post-interrupt"
    UNINSTALL = "uninstall"
    UNINSTALL_INTERRUPT = "uninstall-interrupt"

    @property
    def check(self) -> str | None:
        """The agent mode that must pass for this stage to count as done (None: the interrupt is
        verified by the next stage, ``post-interrupt``, or by the node's boot id)."""
        if self in (Stage.INTERRUPT, Stage.UNINSTALL_INTERRUPT):
            return None
        return f"{self.value}-check"

    @property
    def is_interrupt(self) -> bool:
        return self in (Stage.INTERRUPT, Stage.UNINSTALL_INTERRUPT)


class Action(StrEnum):
    INSTALL = "install"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    CONFIG = "config"
    UNINSTALL = "uninstall"
