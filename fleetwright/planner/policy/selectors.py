"""Label selectors as the planner evaluates them (compartments, selector canaries).

Kubernetes semantics, with one deliberate difference: an empty selector matches *no* node here,
because an empty selector that means "everything" is how a copy-pasted spec reboots a whole fleet.
Admission rejects empty selectors where they are not allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from fleetwright.planner.base import Frozen


class Requirement(Frozen):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator == "In" else not inside


class Selector(Frozen):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.empty:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        parts += [f"{r.key} {r.operator} ({','.join(r.values)})" for r in self.match_expressions]
        return ",".join(parts) or "<empty>"
