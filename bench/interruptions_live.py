"""Benchmark: training jobs interrupted by a real reboot rollout on the local control plane, today's
order against the workload-aware one (``bench/interruptions.py`` is the same in the planner's
simulation, at any scale, in a second).

Reproduce from the repository root with:  .venv/bin/python bench/interruptions_live.py
(options: --nodes, --max-unavailable, --stage-seconds, --restart-fraction, --seed, --json PATH)

The stack of ``bench/rollout.py`` (``bench.harness.Stack``: real control plane, kwok nodes, the
Temporal dev server, the worker and the controller as their own processes, the simulated kubelet
rebooting nodes) with twice ``--nodes`` nodes in two halves of the same rack layout. The same job
placement (``bench.interruptions.place_jobs``) is laid on both halves; on the second half the jobs
run for real (one training Job per node, bound to it, running until its pod is evicted; a job's
Jobs share the label the policy's ``workloadLabel`` names), the first half runs none, so its
rollout sees no workload and takes today's order. The same policy (canary 1, fixed batches of
``--max-unavailable``) rolls the ``tuning`` package with a reboot out over each half in turn.

Every 0.5 s the bench reads the half's Nodes: a node's span runs from the moment it is seen
cordoned by the rollout (its drain follows) to the moment it is seen schedulable again. Each job is
replayed against those spans as in ``bench/interruptions.py`` (interruptions, GPU-hours lost); the
stages here take seconds, not minutes, so the restart cost is stated as a share of a node's median
update time (``--restart-fraction``, 0.79: the simulation's 15 minutes against its 19-minute
nodes). Wall time: kubectl apply to the rollout's Complete; the ideal: ceil(nodes /
maxUnavailable) x the median node span of that run. The default seed lays 21 jobs of 1 to 8 nodes
on 64 nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client

from fleetwright.api.keys import cordon_key
from fleetwright.kube import inventory
from fleetwright.kube.client import ApiClient
from fleetwright.local import examples
from fleetwright.local.nodes import node_name, stage_pod_timing
from fleetwright.local.ticker import Ticker
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput

if not __package__:  # run as a file (python bench/interruptions_live.py): the root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import Stack, loadavg
from bench.interruptions import Figures, Job, changed, emit, figures_of, place_jobs, table
from bench.rollout import manifests as rollout_manifests

GROUP = "bench.fleetwright.io/group"
JOB_LABEL = "bench.fleetwright.io/job"
NAMESPACE = "train"
SAMPLE_SECONDS = 0.5


class Spans:
    """Each node's time cordoned by ``profile``, sampled from the Node list."""

    def __init__(self, api: ApiClient, group: str, profile: str) -> None:
        self.api, self.selector, self.key = api, f"{GROUP}={group}", cordon_key(profile)
        self.began = time.monotonic()
        self.start: dict[str, float] = {}
        self.end: dict[str, float] = {}

    def tick(self) -> None:
        now = time.monotonic() - self.began
        try:
            nodes = inventory.list_items(self.api, "nodes", label_selector=self.selector)
        except Exception:  # a slow read: the next sample sees the same states
            return
        for node in nodes:
            name = node["metadata"]["name"]
            ours = bool(node["spec"].get("unschedulable")) and self.key in node["metadata"].get(
                "annotations", {}
            )
            if ours and name not in self.start:
                self.start[name] = now
            elif not ours and name in self.start and name not in self.end:
                self.end[name] = now

    def spans(self) -> dict[str, tuple[float, float]]:
        return {n: (s, self.end[n]) for n, s in self.start.items() if n in self.end}


def training_jobs(jobs: list[Job]) -> str:
    items: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for job in jobs:
        name = job.name.rsplit("/", 1)[-1]
        for index, node in enumerate(job.nodes):
            items.append(examples.training_job(f"{name}-{index}", NAMESPACE, node, labels={JOB_LABEL: name}))
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def manifests(group: str, args: argparse.Namespace) -> str:
    name = f"bench-{group}"
    profile = examples.profile(name, selector={GROUP: group}, policy=name, interrupt="reboot")
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": args.max_unavailable}},
    ]
    policy = examples.policy(
        name, max_unavailable=args.max_unavailable, steps=steps, workload_label=JOB_LABEL
    )
    return rollout_manifests(RolloutInput(profile=profile, policy=policy))


async def phase(client: Client, profile: str) -> str:
    try:
        memo = await (await client.get_workflow_handle(rollout_workflow_id(profile)).describe()).memo()
    except Exception:  # not started yet
        return ""
    return str((memo.get("progress") or {}).get("phase", ""))


async def roll_out(stack: Stack, client: Client, group: str, args: argparse.Namespace) -> tuple[Spans, float]:
    profile = f"bench-{group}"
    spans = Spans(stack.api(), group, profile)
    with Ticker(spans.tick, SAMPLE_SECONDS, name="spans"):
        began = time.monotonic()
        stack.cluster.kubectl("apply", "-f", "-", input=manifests(group, args))
        while await phase(client, profile) not in ("Complete", "Halted"):
            if time.monotonic() - began > args.timeout:
                raise SystemExit(f"{profile}: no Complete within {args.timeout:.0f}s")
            await asyncio.sleep(1)
        wall = time.monotonic() - began
        await asyncio.sleep(2 * SAMPLE_SECONDS)  # the last uncordons, sampled
    final = await phase(client, profile)
    if final != "Complete":
        raise SystemExit(f"{profile}: the rollout ended {final}")
    print(f"  {group}: Complete in {wall:.0f}s (load {loadavg()})", flush=True)
    return spans, wall


def until(ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout:.0f}s")
        time.sleep(1)


def running(stack: Stack) -> int:
    pods = inventory.list_items(stack.api(), "pods", namespace=NAMESPACE)
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")


async def run(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    names = [node_name(i) for i in range(2 * args.nodes)]
    today, aware = names[: args.nodes], names[args.nodes :]
    jobs = {
        "today": place_jobs(today, random.Random(args.seed), args.idle_percent, args.max_job_nodes),
        "aware": place_jobs(aware, random.Random(args.seed), args.idle_percent, args.max_job_nodes),
    }
    engine = EngineSettings(
        observe_interval_seconds=2,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        stage_pod_annotations=stage_pod_timing(args.stage_seconds),
    )
    rundir = Path(tempfile.mkdtemp(prefix="fleetwright-bench-interruptions-"))
    figures: list[Figures] = []
    recorded: dict[str, Any] = {}
    began = time.monotonic()
    with Stack(2 * args.nodes, engine, rundir, activity_slots=max(200, args.max_unavailable + 100)) as stack:
        print(f"stack with {2 * args.nodes} nodes up (load {loadavg()}); work dir {rundir}", flush=True)
        stack.cluster.kubectl("label", "node", *today, f"{GROUP}=today")
        stack.cluster.kubectl("label", "node", *aware, f"{GROUP}=aware")
        stack.cluster.kubectl("apply", "-f", "-", input=training_jobs(jobs["aware"]))
        placed = sum(len(j.nodes) for j in jobs["aware"])
        await asyncio.to_thread(until, lambda: running(stack) >= placed, args.timeout, "the jobs running")
        client = await connect(stack.temporal.address, stack.temporal.namespace)
        for group, order in (("today", "today's order"), ("aware", "workload-aware")):
            spans, wall = await roll_out(stack, client, group, args)
            measured = spans.spans()
            node_seconds = statistics.median(e - s for s, e in measured.values())
            ideal = math.ceil(args.nodes / args.max_unavailable) * node_seconds
            restart = args.restart_fraction * node_seconds / 3600
            figures.append(figures_of(order, measured, jobs[group], wall, ideal, restart))
            recorded[group] = {"spans": measured, "node_seconds": node_seconds}
    took = time.monotonic() - began
    lines = [
        f"fleet: 2 x {args.nodes} kwok nodes (8 GPUs each, racks of 8), the same {len(jobs['aware'])} jobs "
        f"laid on each half ({sum(len(j.nodes) for j in jobs['aware'])} busy nodes); jobs run on the "
        "workload-aware half only",
        f"policy: maxUnavailable {args.max_unavailable}, canary 1, fixed batches of {args.max_unavailable}; "
        f"tuning with a reboot, stage pods {args.stage_seconds:g} s; a restart costs "
        f"{args.restart_fraction:g} x a node's median update time of the job's GPUs",
        "",
        *table(figures, hours=False),
        "",
        f"benchmark run: {took:.0f} s",
        "reproduce: "
        + " ".join([".venv/bin/python bench/interruptions_live.py", *changed(args, parse_args([]))]),
    ]
    return lines, {"figures": [f.__dict__ for f in figures], "runs": recorded, "seconds": took}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=64, help="nodes per half (a multiple of 8)")
    parser.add_argument("--max-unavailable", type=int, default=16)
    parser.add_argument("--stage-seconds", type=float, default=2.0)
    parser.add_argument("--idle-percent", type=int, default=10)
    parser.add_argument("--max-job-nodes", type=int, default=16)
    # The simulation's 15 minutes against its nodes' 19 minutes: the same share of a node's update.
    parser.add_argument("--restart-fraction", type=float, default=0.79)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the figures to PATH"
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    emit(*asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main(sys.argv[1:])
