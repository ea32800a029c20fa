"""The decision's start claims against the real apiserver, with the moments between its reads
forced: another profile claiming a node between the decision's read and its re-read makes it
withdraw every claim (and the in-progress label that rides on them) and ask to decide again; a
node deleted between the read and the claim is not an error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import RolloutActivities
from fleetwright.api.keys import claim_key, status_label_key
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.kube import nodes as kube_nodes
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.rollout.lifecycle import begin
from tests.support.engine import kubectl_json, label_nodes, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout

pytestmark = pytest.mark.integration

ONE_BATCH = [{"name": "all", "batches": {"strategy": "fixed", "initial": 2}}]


@pytest.fixture
def shared(cluster: ClusterUnderTest, crds: None) -> Iterator[tuple[NodeProfile, Rollout]]:
    """Three nodes, this profile (only as a request: no controller runs) and another NodeProfile
    on the same nodes (in the apiserver, so the decision knows it shares the fleet)."""
    name = unique("race")
    nodes = cluster.add_nodes(3)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    other = Rollout(cluster, f"{name}-other", name, nodes, {"max_unavailable": 1})
    other.apply()
    try:
        yield examples.profile(name, selector={GROUP_LABEL: name}), other
    finally:
        other.delete()


def request(profile: NodeProfile) -> DecideRequest:
    spec = convert.rollout_spec(profile, examples.policy(max_unavailable=2, steps=ONE_BATCH))
    now = datetime.now(UTC)
    return DecideRequest(now=now, profile=profile, state=begin(spec, now))


def after_first_read(monkeypatch: pytest.MonkeyPatch, act: Callable[[list[dict[str, Any]]], object]) -> None:
    """Run ``act`` once, right after the decision's first read of the fleet."""
    real = kube_nodes.list_nodes
    calls = 0

    def list_nodes(api: Any) -> list[dict[str, Any]]:
        nonlocal calls
        listed = real(api)
        calls += 1
        if calls == 1:
            act(listed)
        return listed

    monkeypatch.setattr(kube_nodes, "list_nodes", list_nodes)


def group(cluster: ClusterUnderTest, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl_json(cluster, "nodes", "-l", f"{GROUP_LABEL}={name}")["items"]
    return items


async def test_a_decision_raced_by_another_profile_withdraws_its_claims(
    cluster: ClusterUnderTest, shared: tuple[NodeProfile, Rollout], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, other = shared
    name = profile.metadata.name
    # The other profile claims a node of the shared group after this decision read the fleet.
    raced = other.nodes[2]
    after_first_read(
        monkeypatch,
        lambda _: cluster.kubectl("annotate", "node", raced, f"{claim_key(other.name)}=true"),
    )
    activities = RolloutActivities(from_kubeconfig(cluster.kubeconfig))
    with pytest.raises(ApplicationError) as failure:
        await asyncio.to_thread(activities.observe_and_decide, request(profile))
    assert failure.value.type == "DecisionRaced"
    assert not failure.value.non_retryable
    assert raced in str(failure.value)
    assert other.name in str(failure.value)
    for node in group(cluster, name):
        meta = node["metadata"]
        assert claim_key(name) not in (meta.get("annotations") or {}), meta["name"]
        assert status_label_key(name) not in meta["labels"], meta["name"]

    # Deciding again (Temporal's retry) sees the other claim and goes ahead, claiming its starts.
    monkeypatch.undo()
    report = await asyncio.to_thread(activities.observe_and_decide, request(profile))
    started = [s.node for s in report.decision.start]
    assert started
    assert raced not in started
    claimed = {
        n["metadata"]["name"]
        for n in group(cluster, name)
        if claim_key(name) in (n["metadata"].get("annotations") or {})
    }
    assert claimed == set(started)


async def test_a_node_deleted_between_the_read_and_its_claim_is_not_an_error(
    cluster: ClusterUnderTest, shared: tuple[NodeProfile, Rollout], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, other = shared
    after_first_read(monkeypatch, lambda _: cluster.kubectl("delete", "node", *other.nodes, "--wait=true"))
    activities = RolloutActivities(from_kubeconfig(cluster.kubeconfig))
    report = await asyncio.to_thread(activities.observe_and_decide, request(profile))
    # The starts go to the workflow, whose node workflows end as gone.
    assert len(report.decision.start) == 2
    assert group(cluster, profile.metadata.name) == []
