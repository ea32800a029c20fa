"""Benchmark: the preflight on a fleet where part of the nodes already carry the target.

Reproduce from the repository root with:  .venv/bin/python bench/preflight.py
(options: --nodes, --carrying-percent, --max-unavailable, --stage-seconds, --preflight-seconds,
--json PATH)

The same rollout runs twice on the local stack (``bench.harness.Stack``: real control plane, kwok
nodes, the simulated kubelet, worker and controller as their own processes), each time on a fresh
fleet: the ``tuning`` package with a reboot, canary 1, then fixed batches of ``--max-unavailable``,
once without and once with the DeploymentPolicy's ``preflight``. ``--carrying-percent`` of the
nodes, spread evenly over the fleet, already carry the change: their preflight pods pass, the
others' fail (the simulated kubelet's ``SIM_FAIL_PREFLIGHT_ON``, ``fleetwright/local/stages.yaml``).
A stage pod runs a stage's work and its check for ``--stage-seconds``; a preflight pod runs only the
check, for ``--preflight-seconds``.
Cordons are counted per node from the apiserver's audit log (fleetwright's Node patches that set
``spec.unschedulable``), so a cordon the rollout lifted at once still counts. Printed per run: wall
time from apply to Complete, nodes cordoned (carrying / lacking), cordons per carrying node, nodes
spared as the rollout reports them, and the wall time's fall with the preflight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from fleetwright.api.packageparts import EnvVar
from fleetwright.local import examples
from fleetwright.local.nodes import node_name
from fleetwright.process.shutdown import run_and_exit
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.payloads import RolloutInput

if not __package__:  # run as a file (python bench/preflight.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import Stack, actor, loadavg, manifest, published_progress
from bench.rollout import engine

PROFILE = "preflight-bench"
FINAL = ("Complete", "Halted", "Failed")


@dataclass(frozen=True)
class Run:
    """One rollout's figures."""

    preflight: bool
    wall_seconds: float
    phase: str
    updated: int
    spared: int
    cordoned_carrying: int
    cordoned_lacking: int
    cordons_per_carrying_node: float


def carrying_nodes(nodes: int, percent: int) -> list[str]:
    """``percent`` of the fleet's nodes, spread evenly over it (so every batch meets some)."""
    count = round(nodes * percent / 100)
    return sorted({node_name(i * nodes // count) for i in range(count)}) if count else []


def rollout(args: argparse.Namespace, preflight: bool, lacking: list[str]) -> RolloutInput:
    built = examples.profile(PROFILE, interrupt="reboot")
    fail_on = EnvVar(name="SIM_FAIL_PREFLIGHT_ON", value=",".join(lacking))
    package = built.spec.packages[0].model_copy(update={"env": [fail_on]})
    profile = built.model_copy(update={"spec": built.spec.model_copy(update={"packages": [package]})})
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": args.max_unavailable}},
    ]
    policy = examples.policy(max_unavailable=args.max_unavailable, steps=steps, preflight=preflight)
    settings = engine(args.stage_seconds, stages={"preflight": args.preflight_seconds})
    return RolloutInput(profile=profile, policy=policy, settings=settings)


def cordons(events: list[dict[str, Any]]) -> Counter[str]:
    """Per node, fleetwright's Node patches that cordon it."""
    counted: Counter[str] = Counter()
    for event in events:
        body = event.get("requestObject") or {}
        if (
            actor(event).startswith("fleetwright-")
            and event.get("verb") == "patch"
            and (body.get("spec") or {}).get("unschedulable") is True
        ):
            counted[(event.get("objectRef") or {}).get("name", "")] += 1
    return counted


async def wait_done(client: Client, within: float) -> dict[str, Any]:
    deadline = time.monotonic() + within
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        state = await published_progress(client, PROFILE)
        if state.get("phase") in FINAL:
            return state
        await asyncio.sleep(0.5)
    raise SystemExit(f"no final phase within {within:.0f}s (last: {state.get('message')})")


async def run_once(args: argparse.Namespace, preflight: bool, rundir: Path) -> Run:
    carrying = carrying_nodes(args.nodes, args.carrying_percent)
    lacking = sorted({node_name(i) for i in range(args.nodes)} - set(carrying))
    plan = rollout(args, preflight, lacking)
    with Stack(args.nodes, plan.settings, rundir) as stack:
        client = await connect(stack.temporal.address, stack.temporal.namespace)
        offset = stack.audit_offset()
        items = [manifest(model, model.metadata.name) for model in (plan.policy, plan.profile)]
        started = time.monotonic()
        stack.cluster.kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )
        final = await wait_done(client, args.timeout)
        wall = time.monotonic() - started
        counted = cordons(stack.audited_since(offset))
    return Run(
        preflight=preflight,
        wall_seconds=wall,
        phase=str(final.get("phase")),
        updated=int(final.get("updated") or 0),
        spared=int(final.get("spared") or 0),
        cordoned_carrying=sum(1 for n in carrying if counted[n]),
        cordoned_lacking=sum(1 for n in lacking if counted[n]),
        cordons_per_carrying_node=sum(counted[n] for n in carrying) / len(carrying) if carrying else 0.0,
    )


def report(args: argparse.Namespace, runs: list[Run], took: float) -> list[str]:
    carrying = len(carrying_nodes(args.nodes, args.carrying_percent))
    lines = [
        f"fleet: {args.nodes} kwok nodes, {carrying} already carrying the target ({args.carrying_percent}%); "
        f"tuning with a reboot, canary 1 then fixed batches of {args.max_unavailable}, "
        f"maxUnavailable {args.max_unavailable}, stages {args.stage_seconds:g} s, "
        f"preflight pods {args.preflight_seconds:g} s",
        "",
        f"{'preflight':<11}{'phase':>10}{'updated':>9}{'spared':>8}{'cordoned carrying':>19}"
        f"{'cordoned lacking':>18}{'cordons/carrying':>18}{'wall':>9}",
    ]
    for r in runs:
        lines.append(
            f"{'on' if r.preflight else 'off':<11}{r.phase:>10}{r.updated:>9}{r.spared:>8}"
            f"{r.cordoned_carrying:>12}/{carrying:<6}{r.cordoned_lacking:>11}/{args.nodes - carrying:<6}"
            f"{r.cordons_per_carrying_node:>18.2f}{r.wall_seconds:>8.0f}s"
        )
    off, on = runs
    if off.wall_seconds:
        lines += [
            "",
            f"wall time with the preflight: {on.wall_seconds / off.wall_seconds:.2f}x the run without it",
        ]
    lines += [
        f"benchmark run: {took:.0f} s (load {loadavg()}; a shared 2-core machine: wall times are noisy)",
        "reproduce: .venv/bin/python bench/preflight.py "
        f"--nodes {args.nodes} --carrying-percent {args.carrying_percent} "
        f"--max-unavailable {args.max_unavailable} --stage-seconds {args.stage_seconds:g} "
        f"--preflight-seconds {args.preflight_seconds:g}",
    ]
    return lines


async def run(args: argparse.Namespace) -> list[Run]:
    """Both rollouts, each in a work directory of its own, with the report printed."""
    began = time.monotonic()
    workdir = Path(args.workdir or f"/tmp/fleetwright-bench-preflight-{int(time.time())}")
    runs = [await run_once(args, on, workdir / ("on" if on else "off")) for on in (False, True)]
    print("\n".join(report(args, runs, time.monotonic() - began)), flush=True)
    return runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--carrying-percent", type=int, default=50)
    parser.add_argument("--max-unavailable", type=int, default=4)
    parser.add_argument("--stage-seconds", type=float, default=2.0)
    parser.add_argument(
        "--preflight-seconds", type=float, default=1.0, help="a preflight pod's run: its checks only"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for each rollout")
    parser.add_argument("--workdir", default="")
    parser.add_argument("--json", default="")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    runs = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")


if __name__ == "__main__":
    # In-process clients on the SDK runtime: end as the fleetwright commands do, without the
    # interpreter finalization its threads can abort.
    run_and_exit(main)
