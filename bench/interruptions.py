"""Benchmark: training jobs interrupted by a reboot rollout, in three orders: zone spread
(fleetwright's order when no workload is known), NodeWright's (oldest node first) and
fleetwright's workload-aware order.

Reproduce from the repository root with:  .venv/bin/python bench/interruptions.py
(options: --nodes, --max-unavailable, --batch, --strategy, --replaced-percent, --placement,
--idle-percent, --max-job-nodes, --restart-minutes, --seed, --sweep, --json PATH)

The fleet (``local.trainingfleet``): ``--nodes`` 8-GPU nodes in racks of eight over three zones,
brought up together, ``--replaced-percent`` of them replaced later (created again, out of rack
order); training jobs of 1 to ``--max-job-nodes`` nodes placed ``over-time`` (a scheduler starting
jobs where capacity is free while others finish) or ``packed`` (by rack, at one moment), with
``--idle-percent`` of the nodes free. Its pods carry their controllers' owner references
(PyTorchJob, Job) and no gang label: the workloads are found by ``kube.workloads.node_workloads``,
as the rollout activity finds them, and given to the observations as it gives them. The change: the
``tuning`` package with a reboot on every node, under one DeploymentPolicy (canary 1, then
``--strategy`` batches of ``--batch`` nodes, ``maxUnavailable`` ``--max-unavailable``).

Zone spread and workload-aware are the planner's own simulation (``planner.rollout.preview``, the engine
the rollout workflow runs, every node taking its expected time from ``StageDurations``'s
defaults), without and with the workloads. NodeWright's operator sorts a compartment's nodes by
creation time, oldest first, name as tie-break, and fills each batch in that order, looking at no
pod: it gets the zone-spread run's schedule (the same canary, batch sizes and maxUnavailable; every
node takes the same time, so the i-th node started takes the i-th slot) with its own order in the
slots. Each workload is then replayed against the node times: it is interrupted when one of its
nodes starts (its cordon and drain evict the pod) while it runs; it runs again once none of its
nodes is unavailable. GPU-hours lost per interruption: the workload's GPUs x the time from that
eviction until it runs again, plus ``--restart-minutes`` of all its GPUs (reloading the checkpoint,
warming up, the steps since the last checkpoint). Wall time is the simulated rollout's; the ideal
is every node's time with ``maxUnavailable`` nodes always busy (ceil(nodes / maxUnavailable) x one
node's time). ``--sweep`` runs every fleet shape of ``SWEEP`` over ``--sweep-seeds`` seeds and
prints the GPU-hours ratio against NodeWright's order per fleet, and the minimum.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetwright.kube.workloads import node_workloads
from fleetwright.local import examples
from fleetwright.local.nodes import RACK_LABEL
from fleetwright.local.trainingfleet import GPUS_PER_NODE, FleetShape, Placement, training_fleet
from fleetwright.planner import convert
from fleetwright.planner.rollout.observations import NodeWorkload, Observations
from fleetwright.planner.rollout.preview import Plan, preview
from fleetwright.planner.rollout.snapshot import observe_fleet
from fleetwright.planner.rollout.spec import RolloutSpec

START = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
ZONE_SPREAD, NODEWRIGHT, AWARE = "zone spread", "NodeWright", "workload-aware"
# What the workload-aware order must beat each other order by, in GPU-hours lost (issue 46).
TARGETS = {ZONE_SPREAD: 4.0, NODEWRIGHT: 2.0}
# The fleets --sweep runs: placement x replaced percent x largest job.
PLACEMENTS: tuple[Placement, ...] = ("over-time", "packed")
SWEEP = tuple(itertools.product(PLACEMENTS, (0, 10, 30), (16, 64)))
Spans = dict[str, tuple[float, float]]


@dataclass(frozen=True)
class Job:
    """A workload as the replay sees it: its nodes and all its GPUs."""

    name: str
    nodes: tuple[str, ...]
    gpus: int


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


def jobs_of(workloads: Mapping[str, tuple[NodeWorkload, ...]]) -> list[Job]:
    """The workloads ``kube.workloads.node_workloads`` found, each with its nodes and GPUs."""
    nodes: dict[str, list[str]] = defaultdict(list)
    gpus: dict[str, int] = defaultdict(int)
    for node, running in workloads.items():
        for workload in running:
            nodes[workload.name].append(node)
            gpus[workload.name] += workload.gpus
    return [Job(name, tuple(sorted(nodes[name])), gpus[name]) for name in sorted(nodes)]


def observations(
    nodes: list[dict[str, Any]], workloads: Mapping[str, tuple[NodeWorkload, ...]] | None
) -> Observations:
    """The observations the rollout activity would make: each node's workloads set when known."""
    observed = observe_fleet(nodes, "tuning")
    if not workloads:
        return Observations(nodes=observed)
    return Observations(
        nodes=tuple(
            o.model_copy(update={"workloads": workloads[o.name]}) if o.name in workloads else o
            for o in observed
        )
    )


def nodewright_order(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """NodeWright's order of a compartment's nodes: oldest ``creationTimestamp`` first, the name
    breaking ties (RFC 3339 UTC timestamps sort as text)."""
    keys = [(str(n["metadata"]["creationTimestamp"]), str(n["metadata"]["name"])) for n in nodes]
    return [name for _, name in sorted(keys)]


def in_slots(plan: Plan, order: Sequence[str]) -> Spans:
    """``order`` run on ``plan``'s schedule: the i-th node of ``order`` takes the i-th start of the
    plan (same canary, batches and maxUnavailable). Exact only when every node takes the same
    time, which is checked."""
    if len({p.expected_seconds for p in plan.nodes}) > 1:
        raise SystemExit("nodes of differing expected times: another order's schedule is not a slot map")
    if sorted(order) != sorted(p.node for p in plan.nodes):
        raise SystemExit("the order and the plan cover different nodes")
    slots = sorted((p.start, p.end) for p in plan.nodes)
    return {
        node: ((s - START).total_seconds(), (e - START).total_seconds())
        for node, (s, e) in zip(order, slots, strict=True)
    }


def spans_of(plan: Plan) -> Spans:
    return {p.node: ((p.start - START).total_seconds(), (p.end - START).total_seconds()) for p in plan.nodes}


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


def measure(
    order: str, spans: Spans, plan: Plan, jobs: list[Job], max_unavailable: int, restart_hours: float
) -> Figures:
    """The figures of ``spans`` on ``plan``'s schedule (its wall time, its nodes' time)."""
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
    """Each order's figures, one line each, then how the last (workload-aware) compares with each
    other order against the issue's targets."""
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
    *others, aware = figures
    lines.append("")
    for other in others:
        target = TARGETS.get(other.order)
        longer = aware.wall_seconds / other.wall_seconds - 1 if other.wall_seconds else 0.0
        lines.append(
            f"{aware.order} against {other.order}: GPU-hours lost {lower(other, aware):.2f}x lower"
            + (f" (target >= {target:g}x)" if target else "")
            + f", wall time {longer:+.1%} (target <= +10%)"
        )
    return lines


def lower(other: Figures, aware: Figures) -> float:
    """How many times fewer GPU-hours ``aware`` loses than ``other``."""
    if not aware.gpu_hours_lost:
        return math.inf if other.gpu_hours_lost else 1.0
    return other.gpu_hours_lost / aware.gpu_hours_lost


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--max-unavailable", type=int, default=32)
    parser.add_argument("--batch", type=int, default=0, help="fixed batch size (0: maxUnavailable)")
    parser.add_argument("--strategy", choices=("fixed", "exponential"), default="fixed")
    parser.add_argument("--replaced-percent", type=int, default=10, help="nodes created again later")
    parser.add_argument("--placement", choices=("over-time", "packed"), default="over-time")
    parser.add_argument("--idle-percent", type=int, default=10)
    parser.add_argument("--max-job-nodes", type=int, default=16)
    parser.add_argument("--restart-minutes", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="every fleet shape of SWEEP: the ratio against NodeWright's order",
    )
    parser.add_argument(
        "--sweep-seeds", type=int, default=3, help="seeds per shape with --sweep (from --seed)"
    )
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


def rollout_spec(args: argparse.Namespace) -> RolloutSpec:
    policy = examples.policy(max_unavailable=args.max_unavailable, steps=policy_steps(args))
    return convert.rollout_spec(examples.profile("tuning"), policy)


def shape_of(args: argparse.Namespace) -> FleetShape:
    return FleetShape(
        nodes=args.nodes,
        replaced_percent=args.replaced_percent,
        idle_percent=args.idle_percent,
        max_job_nodes=args.max_job_nodes,
        placement=args.placement,
        seed=args.seed,
    )


def simulated(spec: RolloutSpec, observed: Observations, order: str) -> Plan:
    plan = preview(spec, observed, START)
    if plan.phase.value != "Complete":
        raise SystemExit(f"{order}: the simulated rollout ended {plan.phase.value}: {plan.message}")
    return plan


def compare(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    spec: RolloutSpec,
    zone_plan: Plan,
    args: argparse.Namespace,
) -> tuple[list[Job], list[Figures]]:
    """The workloads on the fleet and the three orders' figures. ``zone_plan`` is the rollout
    without workloads (it depends on the nodes' names and labels only: sweeps reuse it)."""
    workloads = node_workloads(pods, spec.policy.workload_label)
    jobs = jobs_of(workloads)
    aware = simulated(spec, observations(nodes, workloads), AWARE)
    cap, restart_hours = args.max_unavailable, args.restart_minutes / 60
    return jobs, [
        measure(ZONE_SPREAD, spans_of(zone_plan), zone_plan, jobs, cap, restart_hours),
        measure(
            NODEWRIGHT, in_slots(zone_plan, nodewright_order(nodes)), zone_plan, jobs, cap, restart_hours
        ),
        measure(AWARE, spans_of(aware), aware, jobs, cap, restart_hours),
    ]


def run(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    if args.sweep:
        return sweep(args)
    began = time.perf_counter()
    fleet = training_fleet(shape_of(args))
    spec = rollout_spec(args)
    zone_plan = simulated(spec, observations(fleet.nodes, None), ZONE_SPREAD)
    jobs, figures = compare(fleet.nodes, fleet.pods, spec, zone_plan, args)
    took = time.perf_counter() - began
    racks = {str(n["metadata"]["name"]): str(n["metadata"]["labels"][RACK_LABEL]) for n in fleet.nodes}
    return report(args, jobs, figures, took, racks), {
        "args": {k: str(v) for k, v in vars(args).items()},
        "figures": [asdict(f) for f in figures],
        "seconds": took,
    }


def sweep(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """Every shape of ``SWEEP`` x ``--sweep-seeds`` seeds: GPU-hours lost by NodeWright's order and
    the workload-aware one, their ratio per fleet, and the smallest."""
    began = time.perf_counter()
    spec = rollout_spec(args)
    zone_plan: Plan | None = None
    lines = [
        f"{'placement':<11}{'replaced':>9}{'max job':>8}{'seed':>6}{'jobs':>6}{'NodeWright':>12}"
        f"{'aware':>9}{'ratio':>7}{'vs zone':>9}"
    ]
    rows: list[dict[str, Any]] = []
    for (placement, replaced, largest), seed in itertools.product(
        SWEEP, range(args.seed, args.seed + args.sweep_seeds)
    ):
        shape = replace(
            shape_of(args), placement=placement, replaced_percent=replaced, max_job_nodes=largest, seed=seed
        )
        fleet = training_fleet(shape)
        if zone_plan is None:
            zone_plan = simulated(spec, observations(fleet.nodes, None), ZONE_SPREAD)
        jobs, (zone, nodewright, aware) = compare(fleet.nodes, fleet.pods, spec, zone_plan, args)
        row = {
            **asdict(shape),
            "jobs": len(jobs),
            "nodewright": nodewright.gpu_hours_lost,
            "aware": aware.gpu_hours_lost,
            "ratio": lower(nodewright, aware),
            "vs_zone": lower(zone, aware),
        }
        rows.append(row)
        lines.append(
            f"{placement:<11}{replaced:>8}%{largest:>8}{seed:>6}{len(jobs):>6}{nodewright.gpu_hours_lost:>12.0f}"
            f"{aware.gpu_hours_lost:>9.0f}{row['ratio']:>7.2f}{row['vs_zone']:>9.2f}"
        )
    worst = min(rows, key=lambda r: r["ratio"])
    took = time.perf_counter() - began
    lines += [
        "",
        *target_line(rows),
        f"{len(rows)} fleets of {args.nodes} nodes; GPU-hours lost, NodeWright's / workload-aware: minimum "
        f"{worst['ratio']:.2f}x ({worst['placement']}, {worst['replaced_percent']}% replaced, jobs up to "
        f"{worst['max_job_nodes']} nodes, seed {worst['seed']}); never higher than NodeWright's: "
        + ("yes" if worst["ratio"] >= 1 else "NO"),
        f"simulation: {took:.1f} s",
        "",
        " ".join(["reproduce: .venv/bin/python bench/interruptions.py", *_options(args)]),
    ]
    return lines, {"args": {k: str(v) for k, v in vars(args).items()}, "fleets": rows, "seconds": took}


def target_line(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 46's fleet (placed over time, 10 % replaced): the smallest ratio there, against 2x."""
    ratios = [r["ratio"] for r in rows if r["placement"] == "over-time" and r["replaced_percent"] == 10]
    if not ratios:
        return []
    return [f"placed over time, 10% replaced: {min(ratios):.2f}x to {max(ratios):.2f}x (target >= 2x)"]


def interruption_floor(jobs: Sequence[Job], max_unavailable: int) -> float:
    """The fewest interruptions per workload any order reaches under ``maxUnavailable``: no more
    than that many nodes are out at once, a batch ends before the next opens (the workload-aware
    order may fill one past the batch size with a workload's nodes, never past the cap), and a
    workload whose nodes all came back runs again, so a workload of n nodes is interrupted at least
    ceil(n / maxUnavailable) times."""
    return sum(math.ceil(len(j.nodes) / max_unavailable) for j in jobs) / len(jobs) if jobs else 0.0


def report(
    args: argparse.Namespace, jobs: list[Job], figures: list[Figures], took: float, racks: Mapping[str, str]
) -> list[str]:
    busy = {n for j in jobs for n in j.nodes}
    sizes = sorted({len(j.nodes) for j in jobs})
    spanning = sum(1 for j in jobs if len({racks[n] for n in j.nodes}) > 1)
    fits = max(len(j.nodes) for j in jobs) <= args.max_unavailable
    aware = figures[-1]
    floor = interruption_floor(jobs, args.max_unavailable)
    return [
        f"fleet: {args.nodes} nodes x {GPUS_PER_NODE} GPUs, {args.replaced_percent}% replaced later; "
        f"{len(jobs)} workloads placed {args.placement} on {len(busy)} nodes (sizes "
        f"{', '.join(map(str, sizes))} nodes; {spanning} span racks), {args.nodes - len(busy)} idle",
        f"policy: maxUnavailable {args.max_unavailable}, canary 1, then {args.strategy} batches of "
        f"{args.batch or args.max_unavailable}; a reboot change; restart cost {args.restart_minutes:g} min "
        "of a workload's GPUs per interruption",
        "",
        *table(figures),
        f"interruptions per affected workload ({AWARE}): {aware.per_affected_mean:.2f}"
        + (
            " (target <= 1.1: every workload fits within maxUnavailable)"
            if fits
            else f" (some workloads exceed maxUnavailable: no order can do better than {floor:.2f})"
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
    return [
        f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in given.items()
        if k != "json" and v != default[k]
    ]


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
