"""Interrupts: what a change needs after its stages ran (reboot, service restarts, nothing), how the
interrupts of several packages on one node merge into one, and which config keys call for which
interrupt.

Must not decide *when* an interrupt runs; that is the node work (``node.work``) and the rollout.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from enum import StrEnum

from fleetwright.planner.base import Frozen


class InterruptKind(StrEnum):
    NONE = "none"
    NOOP = "noop"
    """An interrupt that disrupts nothing: no drain, but the package's post-interrupt stage runs."""
    SERVICE = "service"
    RESTART_ALL_SERVICES = "restartAllServices"
    REBOOT = "reboot"


# NodeWright's merge rank: reboot > restartAllServices > service > noop (> none: no interrupt).
_RANK = {
    InterruptKind.NONE: 0,
    InterruptKind.NOOP: 1,
    InterruptKind.SERVICE: 2,
    InterruptKind.RESTART_ALL_SERVICES: 3,
    InterruptKind.REBOOT: 4,
}


class Interrupt(Frozen):
    """One interrupt. ``services`` only matters for ``service`` and is kept sorted and unique."""

    kind: InterruptKind = InterruptKind.NONE
    services: tuple[str, ...] = ()

    @property
    def rank(self) -> int:
        return _RANK[self.kind]

    @property
    def present(self) -> bool:
        """Whether there is an interrupt stage (and post-interrupt stages) at all."""
        return self.kind is not InterruptKind.NONE

    @property
    def disruptive(self) -> bool:
        """Whether the node must be drained first: every interrupt but noop disrupts its pods."""
        return self.rank > _RANK[InterruptKind.NOOP]

    def describe(self) -> str:
        if self.kind is InterruptKind.SERVICE:
            return f"restart {', '.join(self.services)}"
        return self.kind.value


NO_INTERRUPT = Interrupt()
REBOOT = Interrupt(kind=InterruptKind.REBOOT)


def service_restart(*services: str) -> Interrupt:
    return Interrupt.model_construct(kind=InterruptKind.SERVICE, services=tuple(sorted(set(services))))


def merge(interrupts: Iterable[Interrupt]) -> Interrupt:
    """The one interrupt that covers all of ``interrupts``: the highest rank wins; at ``service``
    rank the unit lists are unioned (a reboot restarts every service anyway, so it carries none)."""
    best = NO_INTERRUPT
    services: set[str] = set()
    for interrupt in interrupts:
        if interrupt.rank > best.rank:
            best = interrupt
        if interrupt.kind is InterruptKind.SERVICE:
            services.update(interrupt.services)
    if best.kind is InterruptKind.SERVICE:
        return service_restart(*services)
    return best if not best.services else Interrupt.model_construct(kind=best.kind, services=())


def changed_keys(old: Mapping[str, str], new: Mapping[str, str]) -> tuple[str, ...]:
    """Config keys added, removed or changed between two digest maps, sorted."""
    keys = set(old) | set(new)
    return tuple(sorted(k for k in keys if old.get(k) != new.get(k)))


def config_interrupt(keys: Iterable[str], rules: Iterable[tuple[str, Interrupt]]) -> Interrupt:
    """The merged interrupt the changed ``keys`` call for. ``rules`` maps a key or an ``fnmatch``
    glob (``*``, ``?``, ``[..]``) to an interrupt; a key no rule matches needs no interrupt, which
    is the point of config interrupts (a stale mapping must not fire a spurious reboot, NodeWright
    #245)."""
    rule_list = list(rules)
    hits = [
        interrupt for key in keys for pattern, interrupt in rule_list if fnmatch.fnmatchcase(key, pattern)
    ]
    return merge(hits)
