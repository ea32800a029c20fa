"""Agent mode names and how work modes pair with check modes (docs/package-format.md §5.2); pure data."""

from __future__ import annotations

WORK_MODES: tuple[str, ...] = ("apply", "config", "post-interrupt", "uninstall", "upgrade")
CHECK_MODES: tuple[str, ...] = tuple(f"{mode}-check" for mode in WORK_MODES)
INTERRUPT = "interrupt"
# Modes whose steps the agent can run; "interrupt" is a mode too but never runs steps.
STEP_MODES: tuple[str, ...] = WORK_MODES + CHECK_MODES
ALL_MODES: tuple[str, ...] = (*STEP_MODES, INTERRUPT)

UNINSTALL_MODES = frozenset({"uninstall", "uninstall-check"})
UPGRADE_MODES = frozenset({"upgrade", "upgrade-check"})
# Only these work modes honour agent-tracked idempotence flags (docs/package-format.md §11).
FLAG_SKIP_MODES = frozenset({"apply", "post-interrupt"})
# A successful check in these modes writes the version history (docs/package-format.md §12).
HISTORY_MODES = frozenset({"apply-check", "upgrade-check", "uninstall-check"})


def is_check(mode: str) -> bool:
    return mode in CHECK_MODES


def check_of(work_mode: str) -> str:
    return f"{work_mode}-check"
