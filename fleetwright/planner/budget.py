"""The ``maxUnavailable`` accounting: which targeted nodes are unavailable right now and how many
more may be disrupted, profile-wide and per compartment.

A node is unavailable when it is NotReady, cordoned by someone else, disrupted by anything else
(another profile's work on a shared node, an external disruptor), or running this profile's work
(started by this rollout, carried over from an earlier target, or reported running). Every node
this profile works on counts, with or without a drain, so a config change is paced like a version
change (NodeWright let both bypass its budget). Starting a node that is already unavailable costs
nothing; any other start costs one, and a start is allowed only while both the profile-wide and the
compartment's room is at least its cost. So the cap can be exceeded only by others, never by a start.

A small mutable tracker used inside one ``decide`` call; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class BudgetTracker:
    def __init__(
        self,
        unavailable: Iterable[str],
        compartment_of: Mapping[str, str],
        cap: int,
        compartment_caps: Mapping[str, int],
    ) -> None:
        self.unavailable = set(unavailable)
        self.compartment_of = compartment_of
        self.cap = cap
        self.compartment_caps = dict(compartment_caps)
        self.used: dict[str, int] = dict.fromkeys(compartment_caps, 0)
        for node in self.unavailable:
            name = compartment_of.get(node)
            if name is not None:
                self.used[name] = self.used.get(name, 0) + 1

    def cost(self, node: str) -> int:
        return 0 if node in self.unavailable else 1

    def room(self) -> int:
        return self.cap - len(self.unavailable)

    def compartment_room(self, name: str) -> int:
        return self.compartment_caps.get(name, 0) - self.used.get(name, 0)

    def refusal(self, node: str) -> str | None:
        """Why starting ``node`` now would break a cap, or None if it fits."""
        cost = self.cost(node)
        if cost == 0:
            return None
        if self.room() < cost:
            return f"Budget: maxUnavailable {self.cap} reached ({len(self.unavailable)} unavailable)"
        name = self.compartment_of[node]
        if self.compartment_room(name) < cost:
            cap = self.compartment_caps.get(name, 0)
            return f"Budget: compartment {name} maxUnavailable {cap} reached"
        return None

    def take(self, node: str) -> None:
        if node in self.unavailable:
            return
        self.unavailable.add(node)
        name = self.compartment_of[node]
        self.used[name] = self.used.get(name, 0) + 1
