"""Benchmark: fleets and policies drawn at random from every option ``bench/interruptions.py``
has, each run in NodeWright's order and the workload-aware one; prints every fleet where the
workload-aware order interrupts workloads more often or loses more GPU-hours, and the smallest
GPU-hours ratio found.

Reproduce from the repository root with:  .venv/bin/python bench/interruptions_search.py
(options: --fleets N, --seed, --nodes 16,32,48,64)

Each draw picks the fleet size from ``--nodes``, ``maxUnavailable``, the batch size and strategy,
the replaced and idle percentages, the placement, the largest job and the fleet's seed; the
draws are seeded, so a run is repeated exactly. The unit test of the orders holds the same
property on a few dozen draws per run; this is the wide search behind "never higher than
NodeWright's on any fleet the bench generates".
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

if not __package__:  # run as a file: the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.interruptions import (
    ZONE_SPREAD,
    changed,
    compare,
    lower,
    observations,
    rollout_spec,
    shape_of,
    simulated,
)
from bench.interruptions import parse_args as fleet_args
from fleetwright.local.trainingfleet import training_fleet

# What each draw picks from: every option of bench/interruptions.py that shapes a fleet or a policy.
CHOICES: dict[str, tuple[str, ...]] = {
    "--max-unavailable": ("2", "4", "8", "16"),
    "--batch": ("0", "1", "3"),
    "--strategy": ("fixed", "exponential"),
    "--replaced-percent": ("0", "10", "30", "100"),
    "--placement": ("over-time", "packed"),
    "--idle-percent": ("0", "10", "30"),
    "--max-job-nodes": ("1", "4", "16", "64"),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fleets", type=int, default=500)
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--nodes", default="16,32,48,64", help="fleet sizes to draw from")
    return parser.parse_args(argv)


DEFAULTS = parse_args([])


def draws(args: argparse.Namespace) -> list[list[str]]:
    """``--fleets`` command lines of ``bench/interruptions.py``, drawn with ``--seed``."""
    rng = random.Random(args.seed)
    sizes = args.nodes.split(",")
    drawn: list[list[str]] = []
    for _ in range(args.fleets):
        argv = ["--nodes", rng.choice(sizes)]
        for option, values in CHOICES.items():
            argv += [option, rng.choice(values)]
        drawn.append([*argv, "--seed", str(rng.randint(0, 10_000))])
    return drawn


def worse(argv: list[str]) -> tuple[float, list[str]]:
    """One fleet: the GPU-hours ratio (NodeWright's over workload-aware) and what the
    workload-aware order did worse (empty: nothing)."""
    args = fleet_args(argv)
    fleet = training_fleet(shape_of(args))
    spec = rollout_spec(args)
    zone = simulated(spec, observations(fleet.nodes, None), ZONE_SPREAD)
    _, (_, nodewright, aware) = compare(fleet.nodes, fleet.pods, spec, zone, args)
    found = []
    if aware.interruptions > nodewright.interruptions:
        found.append(f"{aware.interruptions} interruptions against {nodewright.interruptions}")
    if aware.gpu_hours_lost > nodewright.gpu_hours_lost + 1e-6:
        found.append(f"{aware.gpu_hours_lost:.1f} GPU-hours lost against {nodewright.gpu_hours_lost:.1f}")
    return lower(nodewright, aware), found


def run(args: argparse.Namespace) -> list[str]:
    began = time.perf_counter()
    lines: list[str] = []
    ratios: list[tuple[float, list[str]]] = []
    for argv in draws(args):
        ratio, found = worse(argv)
        ratios.append((ratio, argv))
        if found:
            lines.append(f"worse: {'; '.join(found)}: bench/interruptions.py {_command(argv)}")
    took = time.perf_counter() - began
    smallest, where = min(ratios)
    return [
        *lines,
        f"{args.fleets} fleets of {args.nodes} nodes: the workload-aware order did worse than "
        f"NodeWright's on {len(lines)}",
        f"smallest GPU-hours ratio, NodeWright's / workload-aware: {smallest:.2f}x "
        f"(bench/interruptions.py {_command(where)})",
        f"simulation: {took:.1f} s",
        "",
        " ".join(["reproduce: .venv/bin/python bench/interruptions_search.py", *changed(args, DEFAULTS)]),
    ]


def _command(argv: list[str]) -> str:
    return " ".join(changed(fleet_args(argv), fleet_args([])))


def main(argv: list[str]) -> None:
    print("\n".join(run(parse_args(argv))))


if __name__ == "__main__":
    main(sys.argv[1:])
