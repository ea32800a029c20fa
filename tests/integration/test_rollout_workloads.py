"""Workload-aware order end to end: real training Jobs and a Deployment on kwok nodes, whose pods
the drains evict; the gang's nodes are drained in one batch, after the idle nodes (issue 35)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client

from fleetwright.local import examples
from fleetwright.local.nodes import OUTCOME_LABEL
from fleetwright.local.ticker import Ticker
from fleetwright.planner.rollout.ordering import order_nodes
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.engine import (
    decisions,
    engine_worker,
    kubectl_json,
    label_nodes,
    running_on,
    simulated_kubelet,
    unique,
)
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, engine_settings
from tests.support.waiting import until, until_phase, until_progress, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

RUN_LABEL = "example.com/training-run"


@pytest.fixture
async def engine(cluster: ClusterUnderTest, temporal_client: Client) -> AsyncIterator[str]:
    async with engine_worker(cluster, temporal_client, "workloads") as queue:
        yield queue


def web_deployment(namespace: str) -> dict[str, Any]:
    """A service: one replica, placed by ``Binder`` (the control plane runs no scheduler)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "nodeSelector": {"no-such-node": "true"},  # only Binder places it
                    "containers": [{"name": "web", "image": "registry.example.com/web:1"}],
                },
            },
        },
    }


class Binder:
    """The scheduler's part for the Deployment: binds its pending pods to ``first`` while that node
    is schedulable, else to ``spare``."""

    def __init__(self, cluster: ClusterUnderTest, namespace: str, first: str, spare: str) -> None:
        self.cluster, self.namespace, self.first, self.spare = cluster, namespace, first, spare
        self.bound: list[tuple[str, str]] = []

    def tick(self) -> None:
        try:
            self._bind_pending()
        except subprocess.CalledProcessError:
            return  # a failed read: the next tick tries again

    def _bind_pending(self) -> None:
        pods = kubectl_json(self.cluster, "pods", "-n", self.namespace, "-l", "app=web")["items"]
        for pod in pods:
            if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            cordoned = kubectl_json(self.cluster, "node", self.first)["spec"].get("unschedulable")
            node = self.spare if cordoned else self.first
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod["metadata"]["name"], "namespace": self.namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            self.cluster.kubectl("create", "-f", "-", input=json.dumps(binding), check=False)
            self.bound.append((pod["metadata"]["name"], node))


async def test_a_gangs_nodes_are_drained_in_one_batch_after_the_idle_nodes(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name = unique("wl")
    nodes = await asyncio.to_thread(cluster.add_nodes, 7)
    (spare,) = await asyncio.to_thread(cluster.add_nodes, 1)  # not targeted: the web replica moves here
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kubectl_json(cluster, "nodes")["items"]}
    # Today's order, in batches of 3, would drain the gang in three batches: 0, 3 and 6.
    plain = order_nodes((n, labels[n]) for n in nodes)
    gang, solo, web, idle = [plain[0], plain[3], plain[6]], plain[1], plain[2], [plain[4], plain[5]]
    namespace = unique("train")
    cluster.kubectl("create", "namespace", namespace)
    jobs = [
        examples.training_job(f"run-1-{i}", namespace, node, labels={RUN_LABEL: "run-1"})
        for i, node in enumerate(gang)
    ]
    jobs.append(examples.training_job("solo", namespace, solo))
    items = [*jobs, web_deployment(namespace)]
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    binder = Binder(cluster, namespace, web, spare)
    with Ticker(binder.tick, 0.3, name="binder"):
        placed = await asyncio.to_thread(
            wait_for, lambda: len(running_on(cluster, namespace)) == 5, 60, "the workloads running"
        )
        assert placed
        assert sorted(running_on(cluster, namespace).values()) == sorted([*gang, solo, web])

        profile = examples.profile(unique("gang"), selector={GROUP_LABEL: name}, interrupt="reboot")
        steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 3}}]
        policy = examples.policy(max_unavailable=3, steps=steps, workload_label=RUN_LABEL)
        settings = engine_settings()
        with simulated_kubelet(cluster):
            handle = await temporal_client.start_workflow(
                RolloutWorkflow.run,
                RolloutInput(profile=profile, policy=policy, settings=settings),
                id=rollout_workflow_id(profile.metadata.name),
                task_queue=engine,
            )
            progress = await until_phase(handle, "Complete", "Halted", within=240)
        assert progress.phase == "Complete", progress
        assert progress.updated == 7
    batch = {s.node: s.batch for d in await decisions(temporal_client, handle) for s in d.decision.start}
    assert sorted(batch) == sorted(nodes)
    # The gang in one batch, after every idle node (the web replica's node is idle: a service
    # survives one node), the single-node job last.
    assert {batch[n] for n in gang} == {2}, batch
    assert {batch[n] for n in [web, *idle]} == {1}, batch
    assert batch[solo] == 3, batch
    # The drains evicted every workload pod: the training Jobs failed, the web replica moved.
    for job in ["run-1-0", "run-1-1", "run-1-2", "solo"]:
        status = kubectl_json(cluster, "job", job, "-n", namespace)["status"]
        assert status.get("failed") == 1, (job, status)
    assert list(running_on(cluster, namespace).values()) == [spare]
    await handle.terminate("test done")


async def test_a_node_waits_for_its_training_job_to_finish_before_it_is_drained(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name = unique("wait")
    nodes = await asyncio.to_thread(cluster.add_nodes, 2)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    busy = nodes[0]
    namespace = unique("train")
    cluster.kubectl("create", "namespace", namespace)
    job = examples.training_job("finishing", namespace, busy, labels={"app": "train"})
    cluster.kubectl("apply", "-f", "-", input=json.dumps(job))
    pod = await until(lambda: running_on(cluster, namespace), 60, "the training pod running")
    profile = examples.profile(unique("wait"), selector={GROUP_LABEL: name}, interrupt="reboot")
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]
    wait = {"selector": {"matchLabels": {"app": "train"}}, "timeoutSeconds": 600}
    policy = examples.policy(max_unavailable=1, steps=steps, workload_wait=wait)
    waiting = "WaitingForWorkloads: " + f"{namespace}/finishing-"
    with simulated_kubelet(cluster):
        handle = await temporal_client.start_workflow(
            RolloutWorkflow.run,
            RolloutInput(profile=profile, policy=policy, settings=engine_settings()),
            id=rollout_workflow_id(profile.metadata.name),
            task_queue=engine,
        )
        # The job runs until the rollout holds its node for it (kwok's hang outcome); then it
        # finishes on its own: without the label, kwok completes the Job's pod.
        await until_progress(
            handle, lambda p: p.waiting_reasons.get(busy, "").startswith(waiting), "the node held", 120
        )
        cluster.kubectl("label", "pod", next(iter(pod)), "-n", namespace, f"{OUTCOME_LABEL}-")
        progress = await until_phase(handle, "Complete", "Halted", within=120)
    assert progress.phase == "Complete", progress
    # Held, not started, until the job finished on its own: its pod was never evicted.
    status = kubectl_json(cluster, "job", "finishing", "-n", namespace)["status"]
    assert status.get("succeeded") == 1, status
    assert not status.get("failed"), status
    await handle.terminate("test done")
