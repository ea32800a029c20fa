"""Seeded GPU training fleets for the interruption benchmarks: Nodes with creation times, and the
pods of the training jobs placed on them, as the API serves them.

A fleet is ``local.nodes`` nodes (racks of eight, three zones) brought up together, of which
``replaced_percent`` were replaced later (the Node created again, at a random later time: out of
rack order). Jobs take their sizes from ``JOB_MIX`` and are placed either ``packed`` (at one
moment, each inside one rack or on whole consecutive racks) or ``over-time``: a scheduler starts
jobs one after another where capacity is free (whole free racks first, then the rack that fits the
rest best, then the emptiest racks) while earlier jobs finish, and the fleet is taken as it runs
once the first jobs have turned over several times, so a job's nodes are not always one rack.
``idle_percent`` of the nodes are kept free.

Each job's pods are pod JSON with their controller's owner reference (a PyTorchJob for a
multi-node job, a Job for a single-node one) and no gang label; every node also runs a DaemonSet
pod (no workload). Pure and deterministic per seed: no clock, no I/O.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fleetwright.local.nodes import NODES_PER_RACK, node_manifest

GPUS_PER_NODE = 8
NAMESPACE = "train"
# Job sizes in nodes and how often each comes up (single-node jobs are the 1s); sizes above
# ``max_job_nodes`` are left out.
JOB_MIX = ((64, 1), (32, 1), (16, 2), (8, 3), (4, 4), (2, 4), (1, 3))
BROUGHT_UP = datetime(2025, 6, 1, 8, 0, tzinfo=UTC)
# Replaced nodes are created again between these many days after the bring-up.
REPLACED_DAYS = (14, 360)
# Over time: the fleet is taken once this many mean job durations have passed.
TURNOVERS = 6
MEAN_JOB_HOURS = 48.0
Placement = Literal["over-time", "packed"]


@dataclass(frozen=True)
class FleetShape:
    nodes: int = 1024
    replaced_percent: int = 10
    idle_percent: int = 10
    max_job_nodes: int = 16
    placement: Placement = "over-time"
    seed: int = 35


@dataclass(frozen=True)
class TrainingJob:
    kind: str
    """``PyTorchJob`` for a multi-node job, ``Job`` for a single-node one."""
    name: str
    nodes: tuple[str, ...]

    @property
    def workload(self) -> str:
        """The name ``kube.workloads`` gives it: ``<Kind>/<namespace>/<name>``."""
        return f"{self.kind}/{NAMESPACE}/{self.name}"


@dataclass(frozen=True)
class TrainingFleet:
    shape: FleetShape
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    jobs: tuple[TrainingJob, ...]


def training_fleet(shape: FleetShape) -> TrainingFleet:
    """The fleet of ``shape``: the same seed always gives the same nodes, pods and jobs."""
    if shape.nodes < 1 or not 0 <= shape.replaced_percent <= 100 or not 0 <= shape.idle_percent < 100:
        raise ValueError(f"fleet shape out of range: {shape}")
    rng = random.Random(shape.seed)  # noqa: S311 - reproducible draws, not secrets
    nodes = [node_manifest(i) for i in range(shape.nodes)]
    for node, created in zip(nodes, creation_times(shape.nodes, shape.replaced_percent, rng), strict=True):
        node["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    names = [str(n["metadata"]["name"]) for n in nodes]
    place = place_packed if shape.placement == "packed" else place_over_time
    placed = place(names, rng, shape.idle_percent, shape.max_job_nodes)
    jobs = tuple(
        TrainingJob("PyTorchJob" if len(on) > 1 else "Job", f"job-{i:04d}", on) for i, on in enumerate(placed)
    )
    pods = [pod for job in jobs for pod in job_pods(job)] + [daemon_pod(name) for name in names]
    return TrainingFleet(shape, nodes, pods, jobs)


def creation_times(count: int, replaced_percent: int, rng: random.Random) -> list[datetime]:
    """Every node created at the bring-up, except ``replaced_percent`` of them (chosen at random),
    created again at random later times."""
    times = [BROUGHT_UP] * count
    low, high = (days * 86400 for days in REPLACED_DAYS)
    for index in sorted(rng.sample(range(count), round(count * replaced_percent / 100))):
        times[index] = BROUGHT_UP + timedelta(seconds=rng.randrange(low, high))
    return times


def sizes_and_weights(max_job_nodes: int, limit: int) -> tuple[list[int], list[int]]:
    mix = [(size, weight) for size, weight in JOB_MIX if size <= min(max_job_nodes, limit)]
    return [s for s, _ in mix], [w for _, w in mix]


def place_packed(
    names: Sequence[str], rng: random.Random, idle_percent: int, max_job_nodes: int
) -> list[tuple[str, ...]]:
    """Jobs placed at one moment, packed by rack (``names`` are in rack order): a job of a rack or
    less inside one rack, a larger one on whole consecutive racks; idle slots spread through."""
    placed: list[tuple[str, ...]] = []
    sizes, weights = sizes_and_weights(max_job_nodes, len(names))
    at = 0
    while at < len(names):
        left_in_rack = NODES_PER_RACK - at % NODES_PER_RACK
        size = rng.choices(sizes, weights)[0]
        if size > NODES_PER_RACK and at % NODES_PER_RACK == 0:
            size = min(size, len(names) - at)  # whole racks
        else:
            size = max(s for s in sizes if s <= min(size, left_in_rack))  # packed inside the rack
        if rng.randrange(100) >= idle_percent:  # else a slot no job holds right now
            placed.append(tuple(names[at : at + size]))
        at += size
    return placed


def place_over_time(
    names: Sequence[str], rng: random.Random, idle_percent: int, max_job_nodes: int
) -> list[tuple[str, ...]]:
    """The jobs running after ``TURNOVERS`` mean job durations of a first-come scheduler that keeps
    ``idle_percent`` of the nodes free: each job starts on free nodes (``_free_nodes``) as soon as
    they are there, and runs a random time."""
    racks = [
        list(range(i, min(i + NODES_PER_RACK, len(names)))) for i in range(0, len(names), NODES_PER_RACK)
    ]
    free = [set(rack) for rack in racks]
    busy_cap = len(names) * (100 - idle_percent) // 100
    sizes, weights = sizes_and_weights(max_job_nodes, max(1, busy_cap))
    running: list[tuple[float, int, tuple[int, ...]]] = []  # (ends, started as, nodes)
    now, busy, started = 0.0, 0, 0
    size = rng.choices(sizes, weights)[0]
    while True:
        if busy + size <= busy_cap:
            taken = _free_nodes(free, size)
            heapq.heappush(running, (now + rng.expovariate(1 / MEAN_JOB_HOURS), started, taken))
            started, busy = started + 1, busy + size
            size = rng.choices(sizes, weights)[0]
            continue
        if running[0][0] >= TURNOVERS * MEAN_JOB_HOURS:
            break  # the fleet as it runs then
        now, _, ended = heapq.heappop(running)
        for index in ended:
            free[index // NODES_PER_RACK].add(index)
        busy -= len(ended)
    return [tuple(names[i] for i in taken) for _, _, taken in sorted(running, key=lambda r: r[1])]


def _free_nodes(free: list[set[int]], size: int) -> tuple[int, ...]:
    """Take ``size`` free nodes as a topology-aware scheduler would: whole free racks while a rack
    or more is wanted, then the rack whose free nodes fit the rest most tightly, else the emptiest
    racks in turn (a job then spans racks)."""
    taken: list[int] = []
    while len(taken) < size:
        need = size - len(taken)
        whole = [r for r, nodes in enumerate(free) if len(nodes) == NODES_PER_RACK]
        fitting = [r for r, nodes in enumerate(free) if len(nodes) >= need]
        if need >= NODES_PER_RACK and whole:
            rack = whole[0]
        elif fitting:
            rack = min(fitting, key=lambda r: (len(free[r]), r))
        else:
            rack = max(range(len(free)), key=lambda r: (len(free[r]), -r))
        chosen = sorted(free[rack])[:need]
        free[rack].difference_update(chosen)
        taken += chosen
    return tuple(sorted(taken))


def job_pods(job: TrainingJob) -> list[dict[str, Any]]:
    """One pod per node of ``job``, owned by its controller (``controller: true``), using the
    node's GPUs."""
    if job.kind == "PyTorchJob":
        owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}
        names = [f"{job.name}-master-0", *(f"{job.name}-worker-{i}" for i in range(len(job.nodes) - 1))]
    else:
        owner = {"apiVersion": "batch/v1", "kind": "Job"}
        names = [f"{job.name}-{_suffix(job.name)}"]
    reference = {**owner, "name": job.name, "uid": _uid(job.kind, job.name), "controller": True}
    reference["blockOwnerDeletion"] = True
    return [_pod(name, node, reference, GPUS_PER_NODE) for name, node in zip(names, job.nodes, strict=True)]


def daemon_pod(node: str) -> dict[str, Any]:
    """The device plugin's pod on ``node``: a DaemonSet's, which no rollout order cares about."""
    reference = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "nvidia-device-plugin",
        "uid": _uid("DaemonSet", "nvidia-device-plugin"),
        "controller": True,
    }
    pod = _pod(f"nvidia-device-plugin-{_suffix(node)}", node, reference, 0)
    pod["metadata"]["namespace"] = "gpu-operator"
    return pod


def _pod(name: str, node: str, owner: dict[str, Any], gpus: int) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": [owner]},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "trainer:1", "resources": resources}],
        },
        "status": {"phase": "Running"},
    }


def _uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{kind}.{name}.{NAMESPACE}.fleetwright.local"))


def _suffix(text: str) -> str:
    return _uid("suffix", text)[:5]
