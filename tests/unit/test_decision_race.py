"""Two profiles deciding at once on shared nodes: each re-reads the fleet after claiming its
starts, and ``raced_claims`` tells it whether another profile claimed nodes in between (then it
withdraws). Whatever the interleaving, the two never both go ahead without one having seen the
other's claim. A decision's claims are patched side by side."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwright.activities.rollout import patch_nodes, raced_claims
from fleetwright.api.keys import claim_key
from fleetwright.errors import NotFoundError, PermanentError
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes

pytestmark = pytest.mark.unit

GPU = {fleet_nodes.RACK_LABEL: "rack-000"}
INFRA, TUNING = examples.profile("infra", selector=GPU), examples.profile("tuning", selector=GPU)


def fleet(count: int = 3) -> list[dict[str, Any]]:
    return [copy.deepcopy(n) for n in fleet_nodes.fleet(count)]


def claim(nodes: list[dict[str, Any]], index: int, profile: str) -> None:
    nodes[index]["metadata"].setdefault("annotations", {})[claim_key(profile)] = "true"


def test_a_claim_another_profile_made_between_the_reads_is_reported() -> None:
    before = fleet()
    after = copy.deepcopy(before)
    claim(after, 1, "infra")
    name = after[1]["metadata"]["name"]
    assert raced_claims(before, after, TUNING) == (f"{name} (fleetwright.io/claim.infra)",)


def test_own_claims_earlier_claims_and_untargeted_nodes_are_not_a_race() -> None:
    before = fleet()
    claim(before, 0, "infra")  # seen by the decision already
    after = copy.deepcopy(before)
    claim(after, 1, "tuning")  # this profile's own claim
    after[2]["metadata"]["labels"][fleet_nodes.RACK_LABEL] = "rack-009"
    claim(after, 2, "infra")  # a node this profile does not target
    assert raced_claims(before, after, TUNING) == ()


# One decision: read the fleet, claim a node, read again. Two of them interleave in any order.
STEPS = ("read", "claim", "verify")


@given(st.permutations([("a", s) for s in STEPS] + [("b", s) for s in STEPS]))
def test_two_interleaved_decisions_never_both_go_ahead_unaware_of_each_other(
    order: list[tuple[str, str]],
) -> None:
    # Keep each decision's own steps in program order; the permutation only interleaves them.
    own = {"a": iter(STEPS), "b": iter(STEPS)}
    schedule = [(who, next(own[who])) for who, _ in order]
    profiles = {"a": (INFRA, 0), "b": (TUNING, 1)}
    live = fleet()
    read: dict[str, list[dict[str, Any]]] = {}
    went_ahead: dict[str, bool] = {}
    for who, step in schedule:
        profile, node = profiles[who]
        if step == "read":
            read[who] = copy.deepcopy(live)
        elif step == "claim":
            claim(live, node, profile.metadata.name)
        else:
            went_ahead[who] = not raced_claims(read[who], copy.deepcopy(live), profile)

    def saw_other(who: str, other: str) -> bool:
        other_profile, node = profiles[other]
        annotations = read[who][node]["metadata"].get("annotations") or {}
        return claim_key(other_profile.metadata.name) in annotations

    if went_ahead["a"] and went_ahead["b"]:
        assert saw_other("a", "b") or saw_other("b", "a")


def test_a_decisions_claims_are_patched_side_by_side_and_a_deleted_node_needs_none() -> None:
    """One at a time, a 200-node decision's claims outlasted the activity's bound at 10,000 nodes."""
    together = threading.Barrier(4, timeout=5)  # broken unless four patches are in flight at once
    patched: list[str] = []

    def patch(node: str) -> None:
        together.wait()
        if node == "gone":
            raise NotFoundError("node gone does not exist")
        patched.append(node)

    patch_nodes(patch, ["a", "b", "gone", "c"])
    assert sorted(patched) == ["a", "b", "c"]

    def refused(node: str) -> None:
        raise PermanentError(f"node {node}: forbidden")

    with pytest.raises(PermanentError, match="forbidden"):
        patch_nodes(refused, ["a", "b"])
