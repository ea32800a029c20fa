"""Benchmark: training jobs interrupted by a reboot rollout, today's order against the
workload-aware one.

Reproduce from the repository root with:  .venv/bin/python bench/interruptions.py
(options: --nodes, --max-unavailable, --batch, --idle-percent, --max-job-nodes, --restart-minutes,
--seed, --strategy, --json PATH)

The fleet: ``local.nodes`` GPU nodes (8 GPUs each, racks of 8, three zones), with gang jobs
placed the way a topology-aware scheduler places them: a job of a rack or less packed inside one
rack, a larger one on whole consecutive racks; a mix of sizes (16, 8, 4 and 2 nodes and
single-node jobs, with ``--max-job-nodes 64`` also 32 and 64, every pod using its node's 8 GPUs)
and some idle nodes (``--idle-percent`` of the slots no job holds). The change: the
``tuning`` package with a reboot interrupt on every node, under one DeploymentPolicy (canary 1,
then fixed batches of ``--batch`` nodes, ``maxUnavailable`` ``--max-unavailable``).

Both rollouts are the planner's own simulation (``planner.preview``, the engine the rollout
workflow runs, every node taking its expected time from ``StageDurations``'s defaults): once
without workload information (today's order: zones round-robin, a hash inside a zone) and once
with the workloads the rollout activity observes. Each job is then replayed against the simulated
node times: a job is interrupted when one of its nodes starts (its cordon and drain evict the pod)
while the job runs; it runs again once none of its nodes is unavailable. GPU-hours lost per
interruption: the job's pods x GPUs x the time from that eviction until it runs again, plus
``--restart-minutes`` of all its GPUs (reloading the checkpoint, warming up, the steps since the
last checkpoint). Wall time is the simulated rollout's; the ideal is every node's time with
``maxUnavailable`` nodes always busy (ceil(nodes / maxUnavailable) x one node's time).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetwright.local import examples
from fleetwright.local.nodes import NODES_PER_RACK, fleet
from fleetwright.planner import convert
from fleetwright.planner.nodelist import observe_fleet
from fleetwright.planner.observations import NodeObservation, NodeWorkload, Observations
from fleetwright.planner.preview import Plan, preview

START = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
GPUS_PER_NODE = 8
# Job sizes in nodes and how often each comes up (single-node jobs are the 1s); sizes above
# --max-job-nodes are left out.
JOB_MIX = ((64, 1), (32, 1), (16, 2), (8, 3), (4, 4), (2, 4), (1, 3))


@dataclass(frozen=True)
class Job:
    name: str
    nodes: tuple[str, ...]

    @property
    def gpus(self) -> int:
        return len(self.nodes) * GPUS_PER_NODE


@dataclass
class Figures:
    order: str
    workloads: int
    interrupted: int
    interruptions: int
    per_affected_mean: float
    per_affected_max: int
    gpu_hours_lost: float
    restart_gpu_hours: float
    wall_seconds: float
    ideal_seconds: float
    ratio: float


def place_jobs(names: list[str], rng: random.Random, idle_percent: int, max_job_nodes: int) -> list[Job]:
    """Jobs packed by rack (``names`` are in rack order), idle nodes spread through the fleet."""
    jobs: list[Job] = []
    mix = [(size, weight) for size, weight in JOB_MIX if size <= max_job_nodes]
    sizes, weights = [s for s, _ in mix], [w for _, w in mix]
    at = 0
    while at < len(names):
        left_in_rack = NODES_PER_RACK - at % NODES_PER_RACK
        size = rng.choices(sizes, weights)[0]
        if size > NODES_PER_RACK and at % NODES_PER_RACK == 0:
            size = min(size, len(names) - at)  # whole racks
        else:
            size = max(s for s in sizes if s <= min(size, left_in_rack))  # packed inside the rack
        if rng.randrange(100) >= idle_percent:  # else a slot no job holds right now
            jobs.append(Job(f"Job/train/job-{len(jobs):03d}", tuple(names[at : at + size])))
        at += size
    return jobs


def observations(nodes: list[dict[str, Any]], jobs: list[Job], with_workloads: bool) -> Observations:
    observed = observe_fleet(nodes, "tuning")
    if not with_workloads:
        return Observations(nodes=observed)
    on: dict[str, tuple[NodeWorkload, ...]] = {}
    for job in jobs:
        for node in job.nodes:
            on[node] = (NodeWorkload(name=job.name, pods=1, gpus=GPUS_PER_NODE),)
    return Observations(nodes=tuple(_with(o, on.get(o.name, ())) for o in observed))


def _with(node: NodeObservation, workloads: tuple[NodeWorkload, ...]) -> NodeObservation:
    return node.model_copy(update={"workloads": workloads}) if workloads else node


def replay(job: Job, spans: dict[str, tuple[float, float]], restart_hours: float) -> tuple[int, float, float]:
    """(interruptions, GPU-hours lost, of which restarts) of ``job`` under the node spans."""
    interruptions, lost, restarts = 0, 0.0, 0.0
    down_from, down_until = 0.0, -math.inf
    for start, end in sorted(spans[n] for n in job.nodes):
        if start >= down_until:  # running: this drain interrupts it
            if interruptions:
                lost += job.gpus * (down_until - down_from) / 3600
            interruptions += 1
            restarts += job.gpus * restart_hours
            down_from, down_until = start, end
        else:  # already down: the drain only keeps it down longer
            down_until = max(down_until, end)
    if interruptions:
        lost += job.gpus * (down_until - down_from) / 3600
    return interruptions, lost + restarts, restarts


def measure(order: str, plan: Plan, jobs: list[Job], max_unavailable: int, restart_hours: float) -> Figures:
    spans = {p.node: ((p.start - START).total_seconds(), (p.end - START).total_seconds()) for p in plan.nodes}
    wall = ((plan.eta or START) - START).total_seconds()
    node_seconds = max((p.expected_seconds for p in plan.nodes), default=0)
    ideal = math.ceil(len(plan.nodes) / max_unavailable) * node_seconds
    return figures_of(order, spans, jobs, wall, ideal, restart_hours)


def figures_of(
    order: str,
    spans: dict[str, tuple[float, float]],
    jobs: list[Job],
    wall: float,
    ideal: float,
    restart_hours: float,
) -> Figures:
    """The figures of one rollout: ``spans`` (node -> from its drain to schedulable again, in
    seconds) replayed against every job."""
    results = [replay(job, spans, restart_hours) for job in jobs]
    affected = [r[0] for r in results if r[0]]
    return Figures(
        order=order,
        workloads=len(jobs),
        interrupted=len(affected),
        interruptions=sum(affected),
        per_affected_mean=sum(affected) / len(affected) if affected else 0.0,
        per_affected_max=max(affected, default=0),
        gpu_hours_lost=sum(r[1] for r in results),
        restart_gpu_hours=sum(r[2] for r in results),
        wall_seconds=wall,
        ideal_seconds=ideal,
        ratio=wall / ideal if ideal else 0.0,
    )


def table(figures: list[Figures], *, hours: bool = True) -> list[str]:
    """Both orders' figures, one line each, then how they compare against the issue's targets."""
    unit, scale = ("h", 3600) if hours else ("s", 1)
    lines = [
        f"{'':<16}{'interrupted':>12}{'per job mean':>14}{'max':>5}{'GPU-h lost':>12}{'restarts':>10}"
        f"{'wall':>10}{'ideal':>10}{'ratio':>7}"
    ]
    for f in figures:
        lines.append(
            f"{f.order:<16}{f.interrupted:>6}/{f.workloads:<5}{f.per_affected_mean:>14.2f}{f.per_affected_max:>5}"
            f"{f.gpu_hours_lost:>12.1f}{f.restart_gpu_hours:>10.1f}"
            f"{f.wall_seconds / scale:>9.2f}{unit}{f.ideal_seconds / scale:>9.2f}{unit}{f.ratio:>7.3f}"
        )
    today, aware = figures
    lower = today.gpu_hours_lost / aware.gpu_hours_lost if aware.gpu_hours_lost else math.inf
    longer = aware.wall_seconds / today.wall_seconds - 1 if today.wall_seconds else 0.0
    return [
        *lines,
        "",
        f"GPU-hours lost: {lower:.1f}x lower (target >= 4x)",
        f"wall time: {longer:+.1%} (target <= +10%)",
    ]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--max-unavailable", type=int, default=32)
    parser.add_argument("--batch", type=int, default=0, help="fixed batch size (0: maxUnavailable)")
    parser.add_argument("--strategy", choices=("fixed", "exponential"), default="fixed")
    parser.add_argument("--idle-percent", type=int, default=10)
    parser.add_argument("--max-job-nodes", type=int, default=16)
    parser.add_argument("--restart-minutes", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the figures to PATH"
    )
    return parser.parse_args(argv)


def policy_steps(args: argparse.Namespace) -> list[dict[str, Any]]:
    batch = args.batch or args.max_unavailable
    batches: dict[str, Any] = {"strategy": args.strategy, "initial": batch}
    if args.strategy == "exponential":
        batches["growthFactor"] = 2
    return [{"name": "canary", "canary": {"count": 1}}, {"name": "rest", "batches": batches}]


def run(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    nodes = fleet(args.nodes)
    names = [str(n["metadata"]["name"]) for n in nodes]
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    jobs = place_jobs(names, random.Random(args.seed), args.idle_percent, args.max_job_nodes)
    policy = examples.policy(max_unavailable=args.max_unavailable, steps=policy_steps(args))
    spec = convert.rollout_spec(examples.profile("tuning"), policy)
    restart_hours = args.restart_minutes / 60
    figures = []
    began = time.perf_counter()
    for order, with_workloads in (("today's order", False), ("workload-aware", True)):
        plan = preview(spec, observations(nodes, jobs, with_workloads), START)
        if plan.phase.value != "Complete":
            raise SystemExit(f"{order}: the simulated rollout ended {plan.phase.value}: {plan.message}")
        figures.append(measure(order, plan, jobs, args.max_unavailable, restart_hours))
    took = time.perf_counter() - began
    return report(args, jobs, figures, took), {
        "args": {k: str(v) for k, v in vars(args).items()},
        "figures": [asdict(f) for f in figures],
        "seconds": took,
    }


def report(args: argparse.Namespace, jobs: list[Job], figures: list[Figures], took: float) -> list[str]:
    busy = sum(len(j.nodes) for j in jobs)
    sizes = sorted({len(j.nodes) for j in jobs})
    fits = max(len(j.nodes) for j in jobs) <= args.max_unavailable
    aware = figures[1]
    return [
        f"fleet: {args.nodes} nodes x {GPUS_PER_NODE} GPUs, {len(jobs)} jobs on {busy} nodes "
        f"(sizes {', '.join(map(str, sizes))} nodes), {args.nodes - busy} idle",
        f"policy: maxUnavailable {args.max_unavailable}, canary 1, then {args.strategy} batches of "
        f"{args.batch or args.max_unavailable}; a reboot change; restart cost {args.restart_minutes:g} min "
        "of a job's GPUs per interruption",
        "",
        *table(figures),
        f"interruptions per affected job: {aware.per_affected_mean:.2f}"
        + (
            " (target <= 1.1: every job fits within maxUnavailable)"
            if fits
            else " (some jobs exceed maxUnavailable)"
        ),
        f"simulation: {took:.1f} s",
        "",
        " ".join(["reproduce: .venv/bin/python bench/interruptions.py", *_options(args)]),
    ]


def _options(args: argparse.Namespace) -> list[str]:
    return changed(args, parse_args([]))


def changed(args: argparse.Namespace, defaults: argparse.Namespace) -> list[str]:
    """The options that differ from their defaults, as the command line that reproduces them."""
    given, default = vars(args), vars(defaults)
    return [f"--{k.replace('_', '-')} {v}" for k, v in given.items() if k != "json" and v != default[k]]


def emit(lines: list[str], data: dict[str, Any], json_path: Path | None) -> None:
    """Print the report; with ``json_path``, also write ``data`` there as JSON."""
    print("\n".join(lines))
    if json_path is not None:
        json_path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    emit(*run(args), args.json)


if __name__ == "__main__":
    if not __package__:  # run as a file: the repository root holds bench/
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main(sys.argv[1:])
