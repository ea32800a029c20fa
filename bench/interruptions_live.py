"""Benchmark: training jobs interrupted by a real reboot rollout on the local control plane, in the
three orders of ``bench/interruptions.py`` (zone spread, NodeWright's, workload-aware), with the
simulation's figures for the same fleet beside them.

Reproduce from the repository root with:  .venv/bin/python bench/interruptions_live.py
(options: --nodes, --max-unavailable, --replaced-percent, --placement, --idle-percent,
--max-job-nodes, --stage-seconds, --restart-minutes, --seed, --timeout, --json PATH)

The fleet is the simulation's (``local.trainingfleet``, the same shape and seed): laid twice, as
two groups of ``--nodes`` kwok nodes with the same labels (zone, rack) and the same jobs, only the
names differ (``gpu-node-0000`` on; the second group's numbers follow the first's). Its jobs are
created as their controllers run them: a multi-node job is a PyTorchJob (master and workers; the
Kubeflow training operator creates its pods), a single-node job a Job (the Job controller creates
its pod), each pod placed on its job's node (the bench binds the operator's pods, the local control
plane runs no scheduler) and running until evicted. The workloads are read back from the API
through ``kube.workloads.node_workloads`` (real owner references: Pod -> PyTorchJob, Pod -> Job)
and must be the fleet's jobs. The stack is ``bench.harness.Stack`` (control plane, Temporal, the
worker and controller processes, the simulated kubelet rebooting nodes). One DeploymentPolicy
shape (canary 1, fixed batches of ``--max-unavailable``) rolls ``tuning`` with a reboot over each
group: with ``workloadOrder: false`` on the first (zone spread), with the workloads on the second
(workload-aware).

Every 0.5 s the bench lists the group's Nodes and pods: a node's span runs from the eviction of its
training pod (first seen terminating, failed or gone; the cordon for an idle node) to the moment it
is schedulable again. Each workload is replayed against those spans as in the simulation
(interrupted when one of its pods is evicted while it runs; it runs again once none of its nodes is
down). NodeWright's order is not an engine order: it is emulated on the zone-spread run exactly as
the simulation emulates it (``in_slots``): the nodes sorted by creation time (the fleet's:
replaced nodes later, the name breaking ties) take the zone-spread rollout's observed slots in the
order they started. The stages take seconds here, not the simulation's 19 minutes: every observed
time is scaled by the simulation's node time over the live median node time, so GPU-hours lost
(a restart costs ``--restart-minutes`` of the workload's GPUs) and wall times read in the
simulation's units; the ideal is ceil(nodes / maxUnavailable) x the median node time.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from fleetwright.api.keys import cordon_key
from fleetwright.kube import inventory
from fleetwright.kube.client import ApiClient
from fleetwright.kube.workloads import node_workloads
from fleetwright.local import examples
from fleetwright.local.gangjobs import (
    TRAINING_JOB_LABEL,
    binding,
    pytorch_job,
    pytorch_slot,
    stopped,
    unbound_slots,
)
from fleetwright.local.nodes import BOOT_ID_ANNOTATION, boot_id, node_name, stage_pod_timing
from fleetwright.local.ticker import Ticker
from fleetwright.local.trainingfleet import (
    GPUS_PER_NODE,
    NAMESPACE,
    TrainingFleet,
    TrainingJob,
    training_fleet,
)
from fleetwright.local.trainingoperator import TrainingOperator
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput

if not __package__:  # run as a file (python bench/interruptions_live.py): the root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import interruptions as sim
from bench.harness import Stack, loadavg
from bench.interruptions import AWARE, NODEWRIGHT, ZONE_SPREAD, Figures, Job
from bench.rollout import manifests as rollout_manifests

GROUP = "bench.fleetwright.io/group"
GROUPS = {"zone": ZONE_SPREAD, "aware": AWARE}
SAMPLE_SECONDS = 0.5
Spans = dict[str, tuple[float, float]]


@dataclass(frozen=True)
class Group:
    """One copy of the fleet: its nodes (renamed), pods and jobs as the simulation sees them."""

    name: str
    namespace: str
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    jobs: tuple[TrainingJob, ...]

    @property
    def names(self) -> list[str]:
        return [str(n["metadata"]["name"]) for n in self.nodes]


@dataclass(frozen=True)
class LiveRun:
    """What one group's live rollout showed: its spans, wall and median node time (seconds), the
    workloads read from the API, and the pods seen stopped before their node's cordon."""

    spans: Spans
    wall: float
    node_seconds: float
    jobs: list[Job]
    early: int


def lay(fleet: TrainingFleet, name: str, index: int) -> Group:
    """The fleet as group ``name``: node ``i`` named ``node_name(index * nodes + i)``, its jobs in
    namespace ``train-<name>``; labels, creation times and placement unchanged."""
    count = len(fleet.nodes)
    rename = {str(n["metadata"]["name"]): node_name(index * count + i) for i, n in enumerate(fleet.nodes)}
    namespace = f"train-{name}"
    nodes = copy.deepcopy(fleet.nodes)
    for node in nodes:
        new = rename[node["metadata"]["name"]]
        node["metadata"]["name"] = new
        node["metadata"]["labels"].update({"kubernetes.io/hostname": new, GROUP: name})
        node["metadata"]["annotations"][BOOT_ID_ANNOTATION] = boot_id(new)
        node["status"]["nodeInfo"]["bootID"] = boot_id(new)
    pods = copy.deepcopy([p for p in fleet.pods if p["metadata"]["namespace"] == NAMESPACE])
    for pod in pods:
        pod["metadata"]["namespace"] = namespace
        pod["spec"]["nodeName"] = rename[pod["spec"]["nodeName"]]
    jobs = tuple(TrainingJob(j.kind, j.name, tuple(rename[n] for n in j.nodes)) for j in fleet.jobs)
    return Group(name, namespace, nodes, pods, jobs)


def created(group: Group) -> list[dict[str, Any]]:
    """What the bench applies: the group's nodes (the API sets their creation times), its
    namespace, a PyTorchJob per multi-node job and a Job bound to its node per single-node job."""
    nodes = copy.deepcopy(group.nodes)
    for node in nodes:
        node["metadata"].pop("creationTimestamp", None)
        node["status"].pop("conditions", None)  # kwok sets them
    items: list[dict[str, Any]] = [
        *nodes,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": group.namespace}},
    ]
    for job in group.jobs:
        if job.kind == "PyTorchJob":
            items.append(pytorch_job(job.name, group.namespace, f"{GROUP}={group.name}", len(job.nodes)))
        else:
            items.append(examples.training_job(job.name, group.namespace, job.nodes[0], gpus=GPUS_PER_NODE))
    return items


@dataclass
class Watch:
    """The group's Nodes and training pods, sampled: when each node was cordoned by ``profile``
    and schedulable again, and when each original pod (uid -> node) was first seen stopped."""

    api: ApiClient
    group: Group
    profile: str
    pods: dict[str, str]
    began: float = field(default_factory=time.monotonic)
    cordoned: dict[str, float] = field(default_factory=dict)
    uncordoned: dict[str, float] = field(default_factory=dict)
    evicted: dict[str, float] = field(default_factory=dict)

    def tick(self) -> None:
        now = time.monotonic() - self.began
        try:
            # Pods first: a pod seen evicted here has its node's cordon in the node list read after.
            pods = inventory.list_items(self.api, "pods", namespace=self.group.namespace)
            nodes = inventory.list_items(self.api, "nodes", label_selector=f"{GROUP}={self.group.name}")
        except Exception:  # a slow read: the next sample sees the same states
            return
        key = cordon_key(self.profile)
        for node in nodes:
            name = node["metadata"]["name"]
            ours = bool(node["spec"].get("unschedulable")) and key in node["metadata"].get("annotations", {})
            if ours and name not in self.cordoned:
                self.cordoned[name] = now
            elif not ours and name in self.cordoned and name not in self.uncordoned:
                self.uncordoned[name] = now
        live = {p["metadata"]["uid"]: p for p in pods}
        for uid in self.pods:
            if uid not in self.evicted and (uid not in live or stopped(live[uid])):
                self.evicted[uid] = now

    def spans(self) -> tuple[Spans, int]:
        """node -> (its pod's eviction, or its cordon when idle; schedulable again), and how many
        pods stopped before their node was cordoned (none should)."""
        evicted = {self.pods[uid]: t for uid, t in self.evicted.items()}
        early = sum(1 for n, t in evicted.items() if t < self.cordoned.get(n, math.inf))
        spans = {
            n: (max(evicted.get(n, start), start), self.uncordoned[n])
            for n, start in self.cordoned.items()
            if n in self.uncordoned
        }
        return spans, early

    def node_seconds(self) -> float:
        return statistics.median(
            self.uncordoned[n] - s for n, s in self.cordoned.items() if n in self.uncordoned
        )


def bind_gangs(stack: Stack, group: Group) -> None:
    """Bind each PyTorchJob's unplaced pods, slot by slot, to its job's nodes (in one kubectl call;
    a Binding that fails is tried again at the next call)."""
    pods = inventory.list_items(
        stack.api(), "pods", namespace=group.namespace, label_selector=TRAINING_JOB_LABEL
    )
    by_job: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_job.setdefault(pod["metadata"]["labels"][TRAINING_JOB_LABEL], []).append(pod)
    bindings = []
    for job in group.jobs:
        mine = by_job.get(job.name, [])
        placed = {pytorch_slot(p) for p in mine if p["spec"].get("nodeName")}
        for waiting, node in unbound_slots(mine, pytorch_slot, job.nodes, placed):
            bindings.append(binding(waiting["metadata"]["name"], group.namespace, node))
    if bindings:
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": bindings})
        stack.cluster.kubectl("create", "-f", "-", input=body, check=False)


def running(stack: Stack, group: Group) -> list[dict[str, Any]]:
    pods = inventory.list_items(stack.api(), "pods", namespace=group.namespace)
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running" and not stopped(p)]


def start_jobs(stack: Stack, group: Group, timeout: float) -> list[dict[str, Any]]:
    """Every job's pods running on their nodes; returns the pods."""
    busy = sum(len(j.nodes) for j in group.jobs)
    deadline = time.monotonic() + timeout
    while len(pods := running(stack, group)) < busy:
        if time.monotonic() > deadline:
            raise SystemExit(
                f"{group.name}: {len(pods)} of {busy} training pods running after {timeout:.0f}s"
            )
        bind_gangs(stack, group)
        time.sleep(1)
    return pods


def check_workloads(group: Group, pods: list[dict[str, Any]]) -> list[Job]:
    """The workloads ``kube.workloads`` finds in the API's pods: they must be the fleet's jobs."""
    found = sim.jobs_of(node_workloads(pods))
    wanted = sim.jobs_of(node_workloads(group.pods))
    if found != wanted:
        missing = sorted({j.name for j in wanted} ^ {j.name for j in found})[:5]
        raise SystemExit(
            f"{group.name}: the API's workloads are not the fleet's jobs (first differences: {missing})"
        )
    return found


def manifests(group: Group, args: argparse.Namespace) -> str:
    name = f"bench-{group.name}"
    profile = examples.profile(name, selector={GROUP: group.name}, policy=name, interrupt="reboot")
    policy = examples.policy(
        name,
        max_unavailable=args.max_unavailable,
        steps=sim.policy_steps(args),
        workload_order=group.name == "aware",
    )
    return rollout_manifests(RolloutInput(profile=profile, policy=policy))


async def phase(client: Client, profile: str) -> str:
    try:
        memo = await (await client.get_workflow_handle(rollout_workflow_id(profile)).describe()).memo()
    except Exception:  # not started yet
        return ""
    return str((memo.get("progress") or {}).get("phase", ""))


async def roll_out(
    stack: Stack, client: Client, group: Group, pods: dict[str, str], args: argparse.Namespace
) -> tuple[Watch, float]:
    """Roll ``tuning`` over the group; the watch of its nodes and pods, and the wall time."""
    profile, timeout = f"bench-{group.name}", args.timeout
    watch = Watch(stack.api(), group, profile, pods)
    with Ticker(watch.tick, SAMPLE_SECONDS, name="watch"):
        began = time.monotonic()
        stack.cluster.kubectl("apply", "-f", "-", input=manifests(group, args))
        while await phase(client, profile) not in ("Complete", "Halted"):
            if time.monotonic() - began > timeout:
                raise SystemExit(f"{profile}: no Complete within {timeout:.0f}s")
            await asyncio.sleep(1)
        wall = time.monotonic() - began
        await asyncio.to_thread(
            until, lambda: len(watch.evicted) == len(pods), 60, f"{profile}: every pod evicted"
        )
        await asyncio.sleep(2 * SAMPLE_SECONDS)  # the last uncordons, sampled
    final = await phase(client, profile)
    if final != "Complete":
        raise SystemExit(f"{profile}: the rollout ended {final}")
    print(f"  {group.name}: Complete in {wall:.0f}s (load {loadavg()})", flush=True)
    return watch, wall


def until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout:.0f}s")
        time.sleep(SAMPLE_SECONDS)


def slots_of(spans: Spans, order: Sequence[str]) -> Spans:
    """``order`` in the observed slots of ``spans``: the i-th node of ``order`` takes the span of
    the i-th node started (the live ``in_slots``)."""
    if sorted(order) != sorted(spans):
        raise ValueError(f"order: {len(order)} nodes for {len(spans)} observed slots")
    slots = sorted(spans.values())
    return dict(zip(order, slots, strict=True))


def scaled(spans: Spans, factor: float) -> Spans:
    return {n: (s * factor, e * factor) for n, (s, e) in spans.items()}


def ready_nodes(stack: Stack) -> int:
    nodes = inventory.list_items(stack.api(), "nodes", label_selector=GROUP, timeout_seconds=60)
    return sum(
        1
        for n in nodes
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in n.get("status", {}).get("conditions") or []
        )
    )


def bring_up(stack: Stack, groups: list[Group], timeout: float) -> dict[str, list[dict[str, Any]]]:
    """Both groups' nodes Ready and jobs running; group -> its running training pods."""
    items = [item for group in groups for item in created(group)]
    for at in range(0, len(items), 500):
        chunk = {"apiVersion": "v1", "kind": "List", "items": items[at : at + 500]}
        stack.cluster.kubectl("create", "-f", "-", input=json.dumps(chunk), timeout=600)
    total = sum(len(g.nodes) for g in groups)
    until(lambda: ready_nodes(stack) >= total, timeout, f"{total} kwok nodes Ready")
    return {group.name: start_jobs(stack, group, timeout) for group in groups}


def simulated(group: Group, args: argparse.Namespace) -> tuple[list[Figures], float]:
    """The simulation's three orders on the group's fleet (its names), and its node time."""
    spec = sim.rollout_spec(args)
    zone_plan = sim.simulated(spec, sim.observations(group.nodes, None), ZONE_SPREAD)
    _, figures = sim.compare(group.nodes, group.pods, spec, zone_plan, args)
    return figures, max(p.expected_seconds for p in zone_plan.nodes)


def live_figures(order: str, run: LiveRun, sim_seconds: float, args: argparse.Namespace) -> Figures:
    """One order's figures from observed spans, scaled to the simulation's node time."""
    factor = sim_seconds / run.node_seconds
    ideal = math.ceil(len(run.spans) / args.max_unavailable) * run.node_seconds
    return sim.figures_of(
        order,
        scaled(run.spans, factor),
        run.jobs,
        run.wall * factor,
        ideal * factor,
        args.restart_minutes / 60,
    )


async def run(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    fleet = training_fleet(sim.shape_of(args))
    groups = [lay(fleet, name, i) for i, name in enumerate(GROUPS)]
    engine = EngineSettings(
        observe_interval_seconds=2,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        stage_pod_annotations=stage_pod_timing(args.stage_seconds),
    )
    rundir = Path(tempfile.mkdtemp(prefix="fleetwright-bench-interruptions-"))
    began = time.monotonic()
    live: dict[str, LiveRun] = {}
    with Stack(0, engine, rundir, activity_slots=max(200, args.max_unavailable + 100)) as stack:
        operator = TrainingOperator(
            stack.cluster.kubeconfig,
            stack.cluster.kubectl,
            workdir=rundir / "training-operator",
            jobs=("pytorchjobs",),
        )
        with operator:
            print(f"stack up (load {loadavg()}); work dir {rundir}", flush=True)
            running_pods = await asyncio.to_thread(bring_up, stack, groups, args.timeout)
            print(f"{len(groups)} x {args.nodes} nodes up, jobs running (load {loadavg()})", flush=True)
            client = await connect(stack.temporal.address, stack.temporal.namespace)
            for group in groups:
                pods = running_pods[group.name]
                jobs = check_workloads(group, pods)
                originals = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods}
                watch, wall = await roll_out(stack, client, group, originals, args)
                spans, early = watch.spans()
                live[group.name] = LiveRun(spans, wall, watch.node_seconds(), jobs, early)
    took = time.monotonic() - began
    return report(args, fleet, groups, live, took)


def report(
    args: argparse.Namespace, fleet: TrainingFleet, groups: list[Group], live: dict[str, LiveRun], took: float
) -> tuple[list[str], dict[str, Any]]:
    """The live figures of the three orders, the simulation's for the same groups, and where their
    counts differ."""
    zone, aware = groups
    sim_zone, sim_seconds = simulated(zone, args)
    sim_aware, _ = simulated(aware, args)
    expected = [sim_zone[0], sim_zone[1], sim_aware[2]]
    z, a = live["zone"], live["aware"]
    nodewright = LiveRun(
        slots_of(z.spans, sim.nodewright_order(zone.nodes)), z.wall, z.node_seconds, z.jobs, 0
    )
    figures = [
        live_figures(order, run, sim_seconds, args)
        for order, run in ((ZONE_SPREAD, z), (NODEWRIGHT, nodewright), (AWARE, a))
    ]
    lines = [
        *header(args, fleet),
        f"live node time (median, cordon to schedulable): zone spread {z.node_seconds:.1f} s, workload-aware "
        f"{a.node_seconds:.1f} s; scaled to the simulation's {sim_seconds / 60:.0f}-minute node; live wall "
        f"{z.wall:.0f} s and {a.wall:.0f} s; pods stopped before their node's cordon: {z.early + a.early}",
        "",
        "live (NodeWright's order: its nodes in the zone-spread run's observed slots)",
        *sim.table(figures),
        "",
        "simulation, same fleet and names",
        *sim.table(expected),
        "",
        *agreement(figures, expected),
        f"interruptions per affected workload, {AWARE} live: {figures[-1].per_affected_mean:.2f}; no order "
        "can do better under this policy than "
        f"{sim.interruption_floor(a.jobs, args.max_unavailable):.2f}",
        f"benchmark run: {took:.0f} s (a shared 2-core machine: times are noisy)",
        "reproduce: "
        + " ".join([".venv/bin/python bench/interruptions_live.py", *sim.changed(args, parse_args([]))]),
    ]
    data = {
        "live": [f.__dict__ for f in figures],
        "simulation": [f.__dict__ for f in expected],
        "node_seconds": {"zone": z.node_seconds, "aware": a.node_seconds},
        "wall_seconds": {"zone": z.wall, "aware": a.wall},
        "seconds": took,
    }
    return lines, data


def header(args: argparse.Namespace, fleet: TrainingFleet) -> list[str]:
    sizes = sorted({len(j.nodes) for j in fleet.jobs})
    gangs = sum(j.kind == "PyTorchJob" for j in fleet.jobs)
    busy = sum(len(j.nodes) for j in fleet.jobs)
    return [
        f"fleet: 2 x {args.nodes} kwok nodes x {GPUS_PER_NODE} GPUs (the simulation's fleet, seed "
        f"{args.seed}, {args.replaced_percent}% replaced, placed {args.placement}): {len(fleet.jobs)} jobs "
        f"of {', '.join(map(str, sizes))} nodes ({gangs} PyTorchJobs, {len(fleet.jobs) - gangs} Jobs), "
        f"{busy} busy nodes",
        f"policy: maxUnavailable {args.max_unavailable}, canary 1, then {args.strategy} batches of "
        f"{args.batch or args.max_unavailable}; tuning with a reboot, stage pods {args.stage_seconds:g} s; "
        f"a restart costs {args.restart_minutes:g} min of the workload's GPUs",
    ]


def agreement(live: list[Figures], expected: list[Figures]) -> list[str]:
    """Where the live counts and the simulation's differ, per order."""
    lines = []
    for got, want in zip(live, expected, strict=True):
        same = (got.interrupted, got.interruptions) == (want.interrupted, want.interruptions)
        lines.append(
            f"{got.order}: live {got.interrupted} workloads / {got.interruptions} interruptions, simulation "
            f"{want.interrupted} / {want.interruptions}: " + ("the same" if same else "DIFFERENT")
        )
    return lines


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=64, help="nodes per group (each order's fleet)")
    parser.add_argument("--max-unavailable", type=int, default=8)
    parser.add_argument("--batch", type=int, default=0, help="fixed batch size (0: maxUnavailable)")
    parser.add_argument("--strategy", choices=("fixed", "exponential"), default="fixed")
    parser.add_argument("--replaced-percent", type=int, default=10)
    parser.add_argument("--placement", choices=("over-time", "packed"), default="over-time")
    parser.add_argument("--idle-percent", type=int, default=10)
    parser.add_argument("--max-job-nodes", type=int, default=16)
    parser.add_argument("--stage-seconds", type=float, default=2.0)
    parser.add_argument("--restart-minutes", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the figures to PATH"
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    sim.emit(*asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main(sys.argv[1:])
