"""The ``maxUnavailable`` accounting: which targeted nodes are unavailable right now and how many
more may be disrupted, profile-wide and per compartment.

A node is unavailable when it is NotReady, cordoned by someone else, disrupted by anything else
(another profile's work on a shared node, an external disruptor), or running this profile's work
(started by this rollout, carried over from an earlier target, or reported running). Every node
this profile works on counts, with or without a drain, so a config change is paced like a version
change (NodeWright let both bypass its budget). Starting a node that is already unavailable costs
nothing; any other start costs one, and a start is allowed only while both the profile-wide and the
compartment's room is at least its cost. So the cap can be exceeded only by others, never by a start.

A node unavailable for someone else's reason is not idle, though: a node cordoned by someone else
still runs its pods, and working under that cordon drains them. So the nodes this profile works on
are a second count, held to the same caps: a free start still needs this profile to be working on
fewer nodes than the cap (the chaos suite caught a rollout with ``maxUnavailable: 1`` starting a
node someone had just cordoned while its own node was mid-update: two nodes disrupted by it).

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
        ours: Iterable[str] = (),
    ) -> None:
        """``ours``: the nodes this profile is working on (they are unavailable too)."""
        self.unavailable = set(unavailable)
        self.ours = set(ours)
        self.compartment_of = compartment_of
        self.cap = cap
        self.compartment_caps = dict(compartment_caps)
        self.used = self._per_compartment(self.unavailable)
        self.ours_used = self._per_compartment(self.ours)

    def _per_compartment(self, nodes: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(self.compartment_caps, 0)
        for node in nodes:
            name = self.compartment_of.get(node)
            if name is not None:
                counts[name] = counts.get(name, 0) + 1
        return counts

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
            return self._own_refusal(node)
        if self.room() < cost:
            return f"Budget: maxUnavailable {self.cap} reached ({len(self.unavailable)} unavailable)"
        name = self.compartment_of[node]
        if self.compartment_room(name) < cost:
            cap = self.compartment_caps.get(name, 0)
            return f"Budget: compartment {name} maxUnavailable {cap} reached"
        return None

    def _own_refusal(self, node: str) -> str | None:
        """Why working on an already-unavailable node would take this profile's own disruptions
        past a cap, or None."""
        if len(self.ours) >= self.cap:
            return f"Budget: maxUnavailable {self.cap} reached ({len(self.ours)} being updated)"
        name = self.compartment_of[node]
        cap = self.compartment_caps.get(name, 0)
        if self.ours_used.get(name, 0) >= cap:
            return f"Budget: compartment {name} maxUnavailable {cap} reached"
        return None

    def take(self, node: str) -> None:
        name = self.compartment_of[node]
        if node not in self.ours:
            self.ours.add(node)
            self.ours_used[name] = self.ours_used.get(name, 0) + 1
        if node in self.unavailable:
            return
        self.unavailable.add(node)
        self.used[name] = self.used.get(name, 0) + 1
