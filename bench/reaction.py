"""Benchmark: how fast fleetwright reacts to a user — a NodeProfile applied until its first node is
cordoned, and the pause annotation until no new node work starts — p50 and p99 over trials.

Reproduce from the repository root with:  .venv/bin/python bench/reaction.py   (--trials,
--stage-seconds)

The same stack as ``bench/rollout.py`` (worker and controller as their own processes, product
defaults for the controller). Each trial applies its own profile and policy (canary 1, then one
node at a time) to its own 4 nodes through the API and polls the nodes every 20 ms for the profile's
cordon. Once the second node is cordoned (the batches have begun) it waits a random part of one
node's duration, so the pause lands anywhere in the cycle of node starts, and annotates the profile
``fleetwright.io/paused=true``. From the rollout's history: when the pause signal arrived, when
the workflow task that applied it completed (from then on no node can start), and the last node
start (StartChildWorkflowExecutionInitiated) after the annotation. Times run from the moment the
bench sends the NodeProfile's create or the annotation's patch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from temporalio.client import Client

from fleetwright.api.common import VERSION
from fleetwright.api.keys import GROUP as API_GROUP
from fleetwright.api.keys import PAUSED_ANNOTATION, cordon_key
from fleetwright.kube.client import ApiClient
from fleetwright.local import examples
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.process.shutdown import run_and_exit
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id

if not __package__:  # run as a file (python bench/reaction.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import Stack, load_line, loadavg, manifest, pause_handled, spread_lines

GROUP = "bench.fleetwright.io/group"
NODES_PER_TRIAL = 4
STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 1}},
]


@dataclass(frozen=True)
class Trial:
    first_cordon: float
    """kubectl apply returned -> first node cordoned by the profile."""
    signal: float
    """pause annotation -> the pause signal in the rollout's history."""
    in_effect: float
    """pause annotation -> the workflow task that handled the signal completed (from then on no
    node should start)."""
    last_start: float
    """pause annotation -> the last node workflow started after it (0 when none started)."""
    late_starts: int
    """Node workflows started after the pause was handled: should be 0."""


def manifests(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trial's DeploymentPolicy and NodeProfile bodies."""
    profile = examples.profile(name, interrupt="reboot", selector={GROUP: name}, policy=name)
    policy = examples.policy(name, max_unavailable=1, steps=STEPS)
    return manifest(policy, name), manifest(profile, name)


def cordoned(core: k8s.CoreV1Api, name: str) -> set[str]:
    key = cordon_key(name)
    found = set()
    for node in core.list_node(label_selector=f"{GROUP}={name}").items:
        annotations = (node.metadata and node.metadata.annotations) or {}
        if node.metadata and node.spec and node.spec.unschedulable and key in annotations:
            found.add(str(node.metadata.name))
    return found


def wait_cordons(core: k8s.CoreV1Api, name: str, count: int, within: float = 120) -> float:
    """Poll every 20 ms until ``count`` distinct nodes have been seen cordoned; the time.monotonic()."""
    seen: set[str] = set()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        seen |= cordoned(core, name)
        if len(seen) >= count:
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"{name}: only {len(seen)} nodes cordoned within {within}s")


async def from_history(client: Client, name: str, paused_at: float) -> tuple[float, float, float, int]:
    handled = await pause_handled(client, rollout_workflow_id(name))
    last = max((s - paused_at for s in handled.starts if s > paused_at), default=0.0)
    late = sum(1 for s in handled.starts if s > handled.in_effect_at)
    return handled.signal_at - paused_at, handled.in_effect_at - paused_at, last, late


async def trial(
    stack: Stack, client: Client, api: ApiClient, name: str, args: argparse.Namespace, rng: random.Random
) -> Trial:
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    policy, profile = manifests(name)
    custom.create_cluster_custom_object(API_GROUP, VERSION, "deploymentpolicies", policy)
    applied = time.monotonic()
    custom.create_cluster_custom_object(API_GROUP, VERSION, "nodeprofiles", profile)
    first = await asyncio.to_thread(wait_cordons, core, name, 1)
    second = await asyncio.to_thread(wait_cordons, core, name, 2)
    cycle = second - first  # one node's whole duration: the gap between node starts
    await asyncio.sleep(rng.uniform(0, cycle))
    paused_at = time.time()
    pause = {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}}
    custom.patch_cluster_custom_object(API_GROUP, VERSION, "nodeprofiles", name, pause)
    await asyncio.sleep(max(10.0, 2 * cycle))  # long enough for any start the pause failed to stop
    signal, in_effect, last, late = await from_history(client, name, paused_at)
    stack.cluster.kubectl("delete", "nodeprofile,deploymentpolicy", name, "--wait=false")
    return Trial(first - applied, signal, in_effect, last, late)


def label_groups(stack: Stack, trials: int) -> None:
    names = sorted(stack.cluster.kubectl("get", "nodes", "-o", "name").stdout.split())
    for i in range(trials):
        group = names[i * NODES_PER_TRIAL : (i + 1) * NODES_PER_TRIAL]
        stack.cluster.kubectl("label", "--overwrite", *group, f"{GROUP}=react-{i}")


def summary(trials: list[Trial], args: argparse.Namespace, load_start: str) -> list[str]:
    lines = [f"trials: {len(trials)} (p99 of {len(trials)} trials is their maximum)"]
    lines += spread_lines(
        (
            ("apply -> first node cordoned", [t.first_cordon for t in trials]),
            ("pause annotation -> pause signal recorded", [t.signal for t in trials]),
            ("pause annotation -> pause signal handled (workflow task)", [t.in_effect for t in trials]),
            ("pause annotation -> last new node started", [t.last_start for t in trials]),
        ),
        58,
    )
    started_after = sum(1 for t in trials if t.last_start > 0)
    lines += [
        f"trials where a node still started after the annotation: {started_after}",
        f"node starts after the pause was handled (should be 0): {sum(t.late_starts for t in trials)}",
        load_line(load_start),
        "reproduce: .venv/bin/python bench/reaction.py "
        f"--trials {args.trials} --stage-seconds {args.stage_seconds:g}",
    ]
    return lines


async def run(args: argparse.Namespace) -> None:
    rundir = Path(args.workdir or f"/tmp/fleetwright-bench-reaction-{int(time.time())}")
    engine = EngineSettings(
        observe_interval_seconds=30,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        stage_pod_annotations=stage_pod_timing(args.stage_seconds),
    )
    rng = random.Random(args.trials)
    with Stack(args.trials * NODES_PER_TRIAL, engine, rundir) as stack:
        label_groups(stack, args.trials)
        client = await connect(stack.temporal.address, stack.temporal.namespace)
        api = stack.api()
        load_start = loadavg()
        results = []
        for i in range(args.trials):
            result = await trial(stack, client, api, f"react-{i}", args, rng)
            print(f"  trial {i}: {result}  (load {loadavg()})", flush=True)
            results.append(result)
    print("\n".join(summary(results, args, load_start)))
    if args.json:
        write_json(Path(args.json), results)


def write_json(path: Path, trials: list[Trial]) -> None:
    path.write_text(json.dumps({"trials": [asdict(t) for t in trials]}, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--stage-seconds", type=float, default=1.0)
    parser.add_argument("--workdir", default="")
    parser.add_argument("--json", default="", metavar="PATH", help="also write each trial's figures to PATH")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    # In-process workers and clients on the SDK runtime: end as the fleetwright commands do, without
    # the interpreter finalization its threads can abort.
    run_and_exit(main)
