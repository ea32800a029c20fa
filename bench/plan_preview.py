"""Benchmark: plan 10,000 nodes x 10 packages.

Reproduce from the repository root with:  python bench/plan_preview.py   (options: --nodes, --packages)

Measures, separately:
- work:    per-node work for every node (actions, dependency phases, merged interrupts), order and
           compartments (``Prepared``), which is what every rollout decision starts from;
- decide:  one ``decide`` call on the whole fleet, given that preparation (the first wave);
- preview: the full plan preview (``fleetwright plan``): decide() run against a simulated fleet
           until the rollout completes.
The fleet is a NodeList read by the same code as ``fleetwright plan --fleet`` (timed apart, as
``observe``). It is deterministic: each node carries an older or the current version of each package in a
pattern giving up to 1,024 distinct recorded states, plus config-only drift on some packages.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from fleetwright.planner.node.interrupts import NO_INTERRUPT, REBOOT, Interrupt, service_restart
from fleetwright.planner.node.packages import ConfigInterruptRule, DesiredPackage, config_digests
from fleetwright.planner.node.state import NodePackageState, PackageRecord, format_annotation
from fleetwright.planner.policy.model import (
    BatchesStep,
    Budget,
    CanaryStep,
    Compartment,
    RolloutPolicy,
    SoakStep,
    Strategy,
    StrategyKind,
)
from fleetwright.planner.policy.selectors import Selector
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import Observations
from fleetwright.planner.rollout.preview import preview
from fleetwright.planner.rollout.snapshot import observe_fleet
from fleetwright.planner.rollout.spec import RolloutSpec
from fleetwright.planner.rollout.targets import Prepared

NOW = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
TARGET_SECONDS = 1.0
PROFILE = "bench"
T = TypeVar("T")


def packages(count: int) -> tuple[DesiredPackage, ...]:
    interrupts: list[Interrupt] = [REBOOT, service_restart("kubelet"), NO_INTERRUPT]
    out = []
    for i in range(count):
        deps = (f"pkg-{i - 1}",) if i % 3 else ()  # chains of three: pkg-0 <- pkg-1 <- pkg-2, ...
        out.append(
            DesiredPackage(
                name=f"pkg-{i}",
                version=f"1.{i}.1",
                depends_on=deps,
                interrupt=interrupts[i % 3],
                config=config_digests({"main.conf": f"v2-{i}", "extra.conf": "x"}),
                config_interrupts=(
                    ConfigInterruptRule(pattern="main*", interrupt=service_restart(f"svc-{i}")),
                ),
            )
        )
    return tuple(out)


def node_list(nodes: int, wanted: tuple[DesiredPackage, ...]) -> dict[str, Any]:
    """A ``kubectl get nodes -o json`` NodeList whose annotations carry the recorded state."""
    old = {p.name: config_digests({"main.conf": f"v1-{i}", "extra.conf": "x"}) for i, p in enumerate(wanted)}
    items = []
    for n in range(nodes):
        pattern = (n * 2654435761) % 1024  # a deterministic spread over 1,024 states
        records = {}
        for i, package in enumerate(wanted):
            behind = bool(pattern >> (i % 10) & 1)
            version = f"1.{i}.0" if behind else package.version
            config = old[package.name] if (behind or n % 7 == 0) else package.config
            records[package.name] = PackageRecord(version=version, config=config)
        key, value = format_annotation(NodePackageState(profile=PROFILE, packages=records))
        name = f"node-{n:05d}"
        labels = {
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": f"zone-{n % 4}",
            "nvidia.com/gpu.product": "NVIDIA-GB200" if n % 5 == 0 else "NVIDIA-H100-80GB-HBM3",
        }
        items.append(
            {
                "kind": "Node",
                "metadata": {"name": name, "labels": labels, "annotations": {key: value}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}


def spec(wanted: tuple[DesiredPackage, ...]) -> RolloutSpec:
    policy = RolloutPolicy(
        max_unavailable=Budget(percent=10),
        steps=(
            CanaryStep(count=3),
            SoakStep(duration_seconds=1800),
            BatchesStep(strategy=Strategy(kind=StrategyKind.EXPONENTIAL, initial_batch=5)),
        ),
        compartments=(
            Compartment(
                name="gb200",
                selector=Selector(match_labels={"nvidia.com/gpu.product": "NVIDIA-GB200"}),
                max_unavailable=Budget(percent=5),
            ),
        ),
    )
    return RolloutSpec(profile=PROFILE, packages=wanted, policy=policy)


def timed(label: str, fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    print(f"{label:<52} {elapsed:7.3f} s")
    return elapsed, result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--packages", type=int, default=10)
    args = parser.parse_args()
    print(f"reproduce: python bench/plan_preview.py --nodes {args.nodes} --packages {args.packages}")
    wanted = packages(args.packages)
    rollout = spec(wanted)
    raw = node_list(args.nodes, wanted)
    _, nodes = timed(
        f"observe: parse {args.nodes} nodes' annotations (not planning)",
        lambda: observe_fleet(raw["items"], PROFILE),
    )
    observations = Observations(nodes=nodes)
    work_s, prepared = timed(
        f"work: {args.nodes} nodes x {args.packages} packages", lambda: Prepared(rollout, observations)
    )
    state = begin(rollout, NOW)
    decide_s, decision = timed(
        "decide: first decision on the whole fleet", lambda: decide(state, observations, NOW, prepared)
    )
    plan_s = work_s + decide_s
    verdict = "within" if plan_s < TARGET_SECONDS else "OVER"
    print(
        f"{'plan (work + first decision)':<52} {plan_s:7.3f} s  ({verdict} the {TARGET_SECONDS:.0f} s target)"
    )
    _, plan = timed(
        "preview: full simulated rollout to completion", lambda: preview(rollout, observations, NOW)
    )
    print(
        f"{len(prepared.needing)} of {args.nodes} nodes need work; first decision starts "
        f"{len(decision.start)} canary node(s); preview: {len(plan.batches)} batches, ETA {plan.eta}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
