"""The rollout turn lists pods only when its policy reads them (``RolloutPolicy.reads_pods``), against
the real apiserver: a policy with ``workloadOrder: false`` makes no pod list; one with
``workloadWait`` makes one (the apiserver's Table of the pods' metadata) and holds the node its
waited pod runs on, and so does the default, whose workload order reads the pods too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.activities import nodeprogress
from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import RolloutActivities
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.kube import workloads as kube_workloads
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.rollout.lifecycle import begin
from tests.support.engine import label_nodes, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

BOTH = [{"name": "all", "batches": {"strategy": "fixed", "initial": 2}}]


@pytest.fixture
def fleet(cluster: ClusterUnderTest) -> Iterator[tuple[NodeProfile, list[str], str]]:
    """Two nodes of this profile, and a namespace with one running pod ``app=<label>`` on the first."""
    name = unique("pods")
    nodes = cluster.add_nodes(2)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    cluster.kubectl("create", "namespace", name)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train-0", "namespace": name, "labels": {"app": name}},
        "spec": {
            "nodeName": nodes[0],
            "containers": [{"name": "train", "image": "registry.example.com/t:1"}],
        },
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))
    try:
        yield examples.profile(name, selector={GROUP_LABEL: name}), nodes, name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false")


def counted(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count the turn's pod lists at the adapter (``kube.workloads.bound_pods``)."""
    real = kube_workloads.bound_pods
    calls = 0

    def bound_pods(api: Any) -> list[dict[str, Any]]:
        nonlocal calls
        calls += 1
        return real(api)

    monkeypatch.setattr(kube_workloads, "bound_pods", bound_pods)
    return lambda: calls


async def turn(
    cluster: ClusterUnderTest, profile: NodeProfile, policy: DeploymentPolicy
) -> tuple[list[str], list[str]]:
    """One observe-and-decide turn: the nodes it starts and those it holds; its claims dropped."""
    now = datetime.now(UTC)
    request = DecideRequest(now=now, profile=profile, state=begin(convert.rollout_spec(profile, policy), now))
    api = from_kubeconfig(cluster.kubeconfig)
    report = await asyncio.to_thread(RolloutActivities(api).observe_and_decide, request)
    started = [s.node for s in report.decision.start]
    for node in started:
        await asyncio.to_thread(nodeprogress.release, api, profile=profile.metadata.name, node=node)
    return started, [w.node for w in report.decision.waiting]


async def test_a_turn_lists_pods_only_for_a_policy_that_reads_them(
    cluster: ClusterUnderTest, fleet: tuple[NodeProfile, list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile, nodes, label = fleet
    lists = counted(monkeypatch)

    unordered = examples.policy(max_unavailable=2, steps=BOTH, workload_order=False)
    started, held = await turn(cluster, profile, unordered)
    assert lists() == 0
    assert sorted(started) == sorted(nodes)
    assert held == []

    wait = {"selector": {"matchLabels": {"app": label}}, "timeoutSeconds": 600}
    waiting = examples.policy(max_unavailable=2, steps=BOTH, workload_order=False, workload_wait=wait)
    started, held = await turn(cluster, profile, waiting)
    assert lists() == 1
    assert started == [nodes[1]]
    assert held == [nodes[0]]  # its pod, seen in the Table of the pods' metadata, still runs

    started, held = await turn(cluster, profile, examples.policy(max_unavailable=2, steps=BOTH))
    assert lists() == 2  # the default's workload order reads the pods too
    assert sorted(started) == sorted(nodes)
