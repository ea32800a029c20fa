"""Gangs run by their real controllers for the integration tier: an Indexed Job (the Job
controller) and a PyTorchJob (the Kubeflow training operator) with one pod per node, the binder
that places their pods (the local control plane runs no scheduler), the log of their pods'
evictions, read from the API while a rollout drains their nodes, and ``roll_over_gang``, which
runs one under a rollout and counts its interruptions."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.keys import claim_key, unit_wait_condition_type
from fleetwright.kube.workloads import node_workloads
from fleetwright.local import examples
from fleetwright.local.gangjobs import (
    Gang,
    binding,
    indexed_job,
    indexed_job_gang,
    pytorch_job,
    pytorch_job_gang,
    stopped,
    unbound_slots,
)
from fleetwright.local.ticker import Ticker
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.engine import decisions, kubectl_json, label_nodes, running_on, simulated_kubelet, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, engine_settings
from tests.support.waiting import until, until_phase


def _pods(cluster: ClusterUnderTest, namespace: str, gang: Gang) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "pods", "-n", namespace, "-l", gang.selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


@dataclass
class IndexBinder:
    """The scheduler's part for a gang: binds the first pod of slot ``i`` to ``nodes[i]``, once;
    replacements stay pending, so only the original pods ever run."""

    cluster: ClusterUnderTest
    namespace: str
    gang: Gang
    nodes: Sequence[str]
    bound: dict[str, str] = field(default_factory=dict)
    """pod uid -> node, the pods this binder placed (a replacement may reuse a name, never a uid)."""
    names: dict[str, str] = field(default_factory=dict)
    """pod uid -> its name."""

    def tick(self) -> None:
        try:
            pods = _pods(self.cluster, self.namespace, self.gang)
        except subprocess.CalledProcessError:
            return  # a failed read: the next tick tries again
        done = {self.nodes.index(node) for node in self.bound.values()}
        for pod, node in unbound_slots(pods, self.gang.slot, self.nodes, done):
            meta = pod["metadata"]
            if self._bind(meta["name"], node):
                self.bound[meta["uid"]] = node
                self.names[meta["uid"]] = meta["name"]

    def _bind(self, pod: str, node: str) -> bool:
        body = json.dumps(binding(pod, self.namespace, node))
        return self.cluster.kubectl("create", "-f", "-", input=body, check=False).returncode == 0


@dataclass
class EvictionLog:
    """When each of ``pods`` (uid -> node) stopped, as read from the API: the first poll that saw
    it terminating (an eviction sets its deletion timestamp), failed or gone."""

    cluster: ClusterUnderTest
    namespace: str
    gang: Gang
    pods: Mapping[str, str]
    stopped: dict[str, float] = field(default_factory=dict)
    """pod uid -> monotonic time it was first seen stopped."""

    def tick(self) -> None:
        try:
            live = {p["metadata"]["uid"]: p for p in _pods(self.cluster, self.namespace, self.gang)}
        except subprocess.CalledProcessError:
            return
        now = time.monotonic()
        for uid in self.pods:
            pod = live.get(uid)
            if uid not in self.stopped and (pod is None or stopped(pod)):
                self.stopped[uid] = now

    def episodes(self, batch: Mapping[str, int]) -> dict[int, list[str]]:
        """Drain batch -> the logged pods (uids) stopped in it (by their node's batch in ``batch``)."""
        found: dict[int, list[str]] = {}
        for uid in sorted(self.stopped, key=self.stopped.__getitem__):
            found.setdefault(batch[self.pods[uid]], []).append(uid)
        return found


@dataclass
class Interruptions:
    workloads: dict[str, set[str]]
    """node -> the workload names fleetwright reads from the pods on it, before the rollout."""
    episodes: dict[int, list[str]]
    """drain batch -> the gang's original pods evicted in it."""


@dataclass(frozen=True)
class JobKind:
    """A kind of gang job: its manifest (name, namespace, node label, pod count) and its gang."""

    manifest: Callable[[str, str, str, int], dict[str, Any]]
    gang: Callable[[str], Gang]


INDEXED_JOB = JobKind(indexed_job, indexed_job_gang)
PYTORCH_JOB = JobKind(pytorch_job, pytorch_job_gang)


def whole_gang_policy(size: int) -> DeploymentPolicy:
    """One batch of ``size`` nodes, all of them at once: a gang's nodes drained together."""
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": size}}]
    return examples.policy(max_unavailable=size, steps=steps)


async def roll_over_gang(
    cluster: ClusterUnderTest,
    client: Client,
    engine: str,
    policy: DeploymentPolicy,
    job: JobKind,
    size: int,
    *,
    busy: bool = False,
) -> tuple[str, Interruptions]:
    """Run a ``job`` named ``train`` of ``size`` pods over as many nodes of their own, roll a
    profile over those nodes under ``policy``, and count the job's evictions per drain batch;
    returns the job's namespace too. ``busy``: another profile claims the first node until the
    others show that they wait for it. No node keeps a unit-wait condition once the rollout ends."""
    name = unique("gang")
    nodes = await asyncio.to_thread(cluster.add_nodes, size)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    namespace = unique("train")
    cluster.kubectl("create", "namespace", namespace)
    created = job.manifest("train", namespace, f"{GROUP_LABEL}={name}", size)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(created))
    gang = job.gang("train")
    binder = IndexBinder(cluster, namespace, gang, nodes)
    with Ticker(binder.tick, 0.3, name="binder"):
        await until(lambda: len(running_on(cluster, namespace)) == size, 60, f"the job's {size} pods running")
    pods = kubectl_json(cluster, "pods", "-n", namespace)["items"]
    seen = {n: {w.name for w in ws} for n, ws in node_workloads(pods).items() if n in nodes}
    log = EvictionLog(cluster, namespace, gang, dict(binder.bound))
    profile = examples.profile(unique("gang"), selector={GROUP_LABEL: name}, interrupt="reboot")
    if busy:
        cluster.kubectl("annotate", "node", nodes[0], f"{claim_key('other')}=true")
    with simulated_kubelet(cluster), Ticker(log.tick, 0.2, name="evictions"):
        handle = await client.start_workflow(
            RolloutWorkflow.run,
            RolloutInput(profile=profile, policy=policy, settings=engine_settings()),
            id=rollout_workflow_id(profile.metadata.name),
            task_queue=engine,
        )
        if busy:
            await wait_for_busy_node(cluster, nodes, profile.metadata.name)
        progress = await until_phase(handle, "Complete", "Halted", within=120)
        assert progress.phase == "Complete", progress
        await until(lambda: len(log.stopped) == size, 30, "every original pod seen stopped")
    batch = {s.node: s.batch for d in await decisions(client, handle) for s in d.decision.start}
    await handle.terminate("test done")
    assert unit_waits(cluster, nodes, profile.metadata.name) == {}
    return namespace, Interruptions(seen, log.episodes(batch))


def unit_waits(cluster: ClusterUnderTest, nodes: list[str], profile: str) -> dict[str, dict[str, str]]:
    """node -> its unit-wait condition for ``profile``, for the nodes that carry one."""
    kind = unit_wait_condition_type(profile)
    listed = kubectl_json(cluster, "nodes", *nodes)["items"]
    return {
        n["metadata"]["name"]: c
        for n in listed
        for c in n["status"].get("conditions") or []
        if c["type"] == kind
    }


async def wait_for_busy_node(cluster: ClusterUnderTest, nodes: list[str], profile: str) -> None:
    """With ``nodes[0]`` claimed by another profile: the other nodes wait for it, each showing the
    unit-wait condition; then the claim ends."""

    def waiting() -> dict[str, dict[str, str]] | None:
        found = unit_waits(cluster, nodes, profile)
        return found if set(found) == set(nodes[1:]) else None

    shown = await until(waiting, 60, "the unit's other nodes showing their wait")
    for condition in shown.values():
        assert (condition["status"], condition["reason"]) == ("True", "WaitingForUnit"), condition
        assert all(n in condition["message"].partition(" since ")[0] for n in nodes), condition
        assert (
            f"{nodes[0]} of its workload cannot start (Busy: profile/other starting)" in condition["message"]
        )
    cluster.kubectl("annotate", "node", nodes[0], f"{claim_key('other')}-")
