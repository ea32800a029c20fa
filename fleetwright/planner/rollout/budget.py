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

A refusal names the nodes that hold the budget and why each counts, and says whether the node
*waits* (this profile's own work holds part of the budget: it frees itself when that work ends) or
is *blocked* (only others hold it: nothing moves until one of them is available again, e.g. a node
someone cordoned and forgot). It also says whether anything but the running nodes' reports can
lift it (a holder that is someone else's, or ours but not reported to this rollout): only then must
the rollout re-observe the fleet to notice. And it says when every holder is a node this rollout's
change failed on and left cordoned: nothing the rollout does or waits for frees that budget, so the
engine fires the failure rule rather than stay blocked (docs/status.md).

A small mutable tracker used inside one ``decide`` call; no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleetwright.planner.policy.model import GATES_SCOPE

# How many holders a refusal names (the rest are counted).
HOLDERS_NAMED = 3
BUDGET = "Budget"
"""The kind of a budget refusal (the text before ':')."""
OURS = "being updated by this profile"


@dataclass(frozen=True)
class Refusal:
    reason: str
    """``Budget: maxUnavailable 1 reached: gpu-7 (cordoned by someone else)``."""
    waiting: bool
    """This profile's own work holds part of the budget: the node starts once that work ends."""
    outside: bool = False
    """A holder is not one of the nodes whose end this rollout hears of (someone else's, or carried
    over): the refusal can lift without a node report, so the fleet must be re-observed."""
    held_by_failed: str | None = None
    """Every holder is a node this rollout failed on and left cordoned: the scope whose budget they
    fill (``GATES_SCOPE`` for the profile-wide cap, else the compartment). None otherwise."""


class BudgetTracker:
    def __init__(
        self,
        unavailable: Mapping[str, str],
        compartment_of: Mapping[str, str],
        cap: int,
        compartment_caps: Mapping[str, int],
        *,
        ours: Iterable[str] = (),
        reporting: Iterable[str] = (),
        failed: Iterable[str] = (),
    ) -> None:
        """``unavailable``: node -> why it is unavailable for someone else's reason; ``ours``: the
        nodes this profile is working on (they are unavailable too); ``reporting``: those of them
        whose node workflows report to this rollout when they end; ``failed``: nodes of
        ``unavailable`` this rollout's change failed on, unavailable only for its own cordon."""
        self.ours = set(ours)
        self.reporting = set(reporting)
        self.failed = set(failed)
        self.why = {**unavailable, **dict.fromkeys(self.ours, OURS)}
        self.unavailable = set(self.why)
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

    def refusal(self, node: str) -> Refusal | None:
        """Why starting ``node`` now would break a cap, or None if it fits."""
        cost = self.cost(node)
        if cost == 0:
            return self._own_refusal(node)
        profile = None
        if self.room() < cost:
            profile = self._refuse(f"maxUnavailable {self.cap}", self.unavailable, GATES_SCOPE)
            if profile.held_by_failed is not None:
                return profile
        name = self.compartment_of[node]
        if self.compartment_room(name) < cost:
            cap = self.compartment_caps.get(name, 0)
            holders = self._in(name, self.unavailable)
            compartment = self._refuse(f"compartment {name} maxUnavailable {cap}", holders, name)
            if profile is None or compartment.held_by_failed is not None:
                return compartment  # failed nodes holding it outlast whatever holds the profile's
        return profile

    def _own_refusal(self, node: str) -> Refusal | None:
        """Why working on an already-unavailable node would take this profile's own disruptions
        past a cap, or None."""
        if len(self.ours) >= self.cap:
            return self._refuse(f"maxUnavailable {self.cap}", self.ours)
        name = self.compartment_of[node]
        cap = self.compartment_caps.get(name, 0)
        if self.ours_used.get(name, 0) >= cap:
            return self._refuse(f"compartment {name} maxUnavailable {cap}", self._in(name, self.ours))
        return None

    def _in(self, compartment: str, nodes: Iterable[str]) -> list[str]:
        return [n for n in nodes if self.compartment_of.get(n) == compartment]

    def _refuse(self, budget: str, holders: Iterable[str], scope: str | None = None) -> Refusal:
        """The refusal naming ``holders``: others' first (they are what a human can act on), then
        the nodes this rollout failed on, then its running ones. ``scope``: the budget's (see
        ``Refusal.held_by_failed``); None for this profile's own disruptions, which failed nodes
        never hold."""
        holders = list(holders)
        shown = heapq.nsmallest(HOLDERS_NAMED, holders, key=lambda n: (n in self.ours, n in self.failed, n))
        named = ", ".join(f"{n} ({self.why[n]})" for n in shown)
        more = f" and {len(holders) - len(shown)} more" if len(holders) > len(shown) else ""
        waiting = any(n in self.ours for n in holders)
        outside = any(n not in self.reporting for n in holders)
        stuck = scope if holders and self.failed.issuperset(holders) else None
        return Refusal(f"{BUDGET}: {budget} reached: {named}{more}", waiting, outside, stuck)

    def take(self, node: str) -> None:
        name = self.compartment_of[node]
        self.why[node] = OURS
        if node not in self.ours:
            self.ours.add(node)
            self.ours_used[name] = self.ours_used.get(name, 0) + 1
        if node in self.unavailable:
            return
        self.unavailable.add(node)
        self.used[name] = self.used.get(name, 0) + 1
