"""The planner's view of a profile's desired packages and their dependency graph.

Owns: ``DesiredPackage`` (what the planner needs from a NodeProfile package, nothing more), config
digests, and the dependency order (``graphlib``; a cycle or a dependency on an unknown package is an
``InvalidSpecError`` naming the field). Must not look at any node.
"""

from __future__ import annotations

import graphlib
import hashlib
from collections.abc import Mapping, Sequence
from functools import cached_property

from pydantic import Field

from fleetwright.errors import InvalidSpecError
from fleetwright.planner.base import Frozen
from fleetwright.planner.node.interrupts import NO_INTERRUPT, Interrupt

DIGEST_LENGTH = 16


def digest(value: str) -> str:
    """A short, stable digest of one config value. Node annotations store digests, not values: the
    values can be large and may be sensitive."""
    return hashlib.sha256(value.encode()).hexdigest()[:DIGEST_LENGTH]


def config_digests(config: Mapping[str, str]) -> dict[str, str]:
    return {key: digest(value) for key, value in sorted(config.items())}


class ConfigInterruptRule(Frozen):
    """A config key (or ``fnmatch`` glob) whose change calls for ``interrupt``."""

    pattern: str
    interrupt: Interrupt


class DesiredPackage(Frozen):
    """One package as a NodeProfile wants it. ``config`` holds digests of the config values."""

    name: str
    version: str
    image: str = ""
    depends_on: tuple[str, ...] = ()
    interrupt: Interrupt = NO_INTERRUPT
    config: dict[str, str] = Field(default_factory=dict)
    config_interrupts: tuple[ConfigInterruptRule, ...] = ()
    uninstall: bool = False
    """True when the profile asks for this package to be removed (``uninstall.apply``)."""

    def config_rules(self) -> list[tuple[str, Interrupt]]:
        return [(rule.pattern, rule.interrupt) for rule in self.config_interrupts]


class PackageGraph:
    """The dependency graph of one profile's packages, checked once and shared by every node."""

    def __init__(self, packages: Sequence[DesiredPackage]) -> None:
        self.packages = {p.name: p for p in packages}
        self._check_names(packages)
        self.order: tuple[str, ...] = self._topological_order()
        # Reverse edges: who depends on a package. Uninstalls run dependents first.
        dependents: dict[str, list[str]] = {name: [] for name in self.packages}
        for package in packages:
            for dep in package.depends_on:
                dependents[dep].append(package.name)
        self.dependents = {name: tuple(sorted(users)) for name, users in dependents.items()}

    def _check_names(self, packages: Sequence[DesiredPackage]) -> None:
        errors: list[tuple[str, str]] = []
        seen: set[str] = set()
        for index, package in enumerate(packages):
            if package.name in seen:
                errors.append((f"spec.packages[{index}].name", f"duplicate package {package.name!r}"))
            seen.add(package.name)
            for dep in package.depends_on:
                if dep not in self.packages:
                    errors.append((f"spec.packages[{index}].dependsOn", f"unknown package {dep!r}"))
                elif dep == package.name:
                    errors.append((f"spec.packages[{index}].dependsOn", "a package cannot depend on itself"))
        if errors:
            raise InvalidSpecError(errors)

    def _topological_order(self) -> tuple[str, ...]:
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for name, package in self.packages.items():
            sorter.add(name, *package.depends_on)
        try:
            sorter.prepare()
        except graphlib.CycleError as err:
            cycle = " -> ".join(err.args[1])
            raise InvalidSpecError([("spec.packages.dependsOn", f"dependency cycle: {cycle}")]) from err
        order: list[str] = []
        while sorter.is_active():
            # Ready packages in name order, so the order is the same on every run and every node.
            ready = sorted(sorter.get_ready())
            order.extend(ready)
            sorter.done(*ready)
        return tuple(order)

    @cached_property
    def position(self) -> dict[str, int]:
        return {name: index for index, name in enumerate(self.order)}
