"""Deterministic node order: which node goes first.

Nodes are spread across a topology key (the zone by default) so the first batches touch every zone
a little rather than one zone a lot; inside a zone the order is a stable hash of the node name
(like SUC hashing UIDs), so it does not follow naming schemes that put one rack's nodes together.
Same names and labels always give the same order. No randomness, no clock.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping

ZONE_LABEL = "topology.kubernetes.io/zone"


def stable_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def order_nodes(nodes: Iterable[tuple[str, Mapping[str, str]]], spread_key: str = ZONE_LABEL) -> list[str]:
    """Node names in rollout order: round-robin over ``spread_key`` values (zones ordered by hash,
    nodes without the label form their own group), each zone in stable-hash order."""
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, labels in nodes:
        groups[labels.get(spread_key, "")].append((stable_hash(name), name))
    keyed: list[tuple[int, str, str, str]] = []
    for zone, members in groups.items():
        zone_key = stable_hash(zone)
        for rank, (name_hash, name) in enumerate(sorted(members)):
            keyed.append((rank, zone_key, name_hash, name))
    keyed.sort()
    return [name for *_, name in keyed]
