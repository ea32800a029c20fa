"""Benchmark: a campaign over three local clusters against its ideal schedule, and how fast a node
failing in one cluster stops new node starts in every other.

Reproduce from the repository root with:  .venv/bin/python bench/campaign.py   (--nodes per
cluster, --max-unavailable, --stage-seconds, --trials, --trial-stage-seconds)

The stack ``fleetwright cluster up --clusters 3`` runs (``local.stack.LocalStack``): three local
control planes with their simulated fleets, one Temporal dev server, the worker (with a member
worker per cluster) and the controller as their own processes; the DeploymentPolicy and the
Campaign applied with kubectl, as a user would.

Wall time: one campaign over every node of the three clusters, the first cluster as its canary
stage, then the other two at once (no soak, no approval). Its ideal is the planner's preview of
each cluster's rollout with the stage durations and zero overhead (``bench/rollout.py``'s), a
stage lasting as long as its slowest cluster, the stages one after the other.

Halt: trials, each a campaign over a few nodes of every cluster in one stage, one node at a time.
In one cluster (a different one in turn) every node of the trial fails a stage (chosen at random,
so the failure lands anywhere in the other clusters' cycle of node starts). Times run from the
failed stage pod (polled every 50 ms) to each other cluster's rollout having handled the
campaign's pause (the workflow task after the signal, from its history): from then on it starts
no node. Node starts after that are counted (should be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fleetwright.api import keys
from fleetwright.api.common import API_VERSION, ObjectMeta
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.api.packageparts import EnvVar
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local import examples
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.members import cluster_names, member_secret
from fleetwright.local.nodes import node_name
from fleetwright.local.stack import LocalStack, StackOptions
from fleetwright.process.shutdown import run_and_exit
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.campaignreport import CLUSTER_PROGRESS_SIGNAL
from fleetwright.workflows.ids import campaign_workflow_id, member_profile, rollout_workflow_id
from fleetwright.workflows.payloads import RolloutInput

if not __package__:  # run as a file (python bench/campaign.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import (
    load_line,
    loadavg,
    manifest,
    memo_progress,
    node_lease_seconds,
    pause_handled,
    percentile,
    spread_lines,
)
from bench.rollout import engine, ideal_seconds

GROUP = "bench.fleetwright.io/group"
WALL = "wall"
WALL_STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "exponential", "initial": 2, "growthFactor": 2}},
]
TRIAL_STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 1}},
]
NODES_PER_TRIAL = 4
FAILING_STAGES = ("apply", "config", "post-interrupt")
FINAL = ("Complete", "Halted", "RolledBack")


def clusters_of(stack: LocalStack) -> dict[str, LocalCluster]:
    """Every cluster of the stack by its campaign name, the home cluster first."""
    members = stack.members.clusters if stack.members is not None else {}
    return {cluster_names(1)[0]: stack.cluster, **members}


def campaign_body(
    name: str, profile: NodeProfile, policy: str, stages: list[dict[str, Any]], clusters: list[str]
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Campaign",
        "metadata": {"name": name},
        "spec": {
            "profile": profile.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
            "policy": {"name": policy},
            "clusters": [{"name": c, "kubeconfigSecret": member_secret(c)} for c in clusters],
            "stages": stages,
        },
    }


def apply(stack: LocalStack, *bodies: dict[str, Any]) -> None:
    stack.cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(bodies)})
    )


async def progress(client: Client, name: str) -> dict[str, Any]:
    """The campaign's published progress; empty before the controller started it."""
    return await memo_progress(client, campaign_workflow_id(name))


# ----- wall time against the ideal schedule ---------------------------------------------------
@dataclass(frozen=True)
class Wall:
    phase: str
    seconds: float
    ideal: float
    stages: list[tuple[str, float, float]]
    """(stage, seconds, ideal seconds) in order."""


def stage_ideals(
    stack: LocalStack, stages: list[dict[str, Any]], profile: NodeProfile, policy: Any, stage_seconds: float
) -> dict[str, float]:
    """Each stage's ideal: its slowest cluster's rollout, previewed on that cluster's nodes."""
    ideals = {}
    settings = engine(stage_seconds)
    for stage in stages:
        spans = []
        for name in stage["clusters"]:
            cluster = clusters_of(stack)[name]
            nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
            member = NodeProfile(metadata=ObjectMeta(name=member_profile(WALL, name)), spec=profile.spec)
            spans.append(
                ideal_seconds(
                    RolloutInput(profile=member, policy=policy, settings=settings), nodes, stage_seconds
                )
            )
        ideals[stage["name"]] = max(spans)
    return ideals


async def wall(stack: LocalStack, client: Client, args: argparse.Namespace) -> Wall:
    names = cluster_names(args.clusters)
    for cluster in clusters_of(stack).values():
        cluster.kubectl("label", "nodes", "--all", f"{GROUP}={WALL}", "--overwrite")
    profile = examples.profile(WALL, selector={GROUP: WALL})
    policy = examples.policy(WALL, max_unavailable=args.max_unavailable, steps=WALL_STEPS)
    stages: list[dict[str, Any]] = [
        {"name": "canary", "clusters": names[:1]},
        {"name": "rest", "clusters": names[1:]},
    ]
    ideals = stage_ideals(stack, stages, profile, policy, args.stage_seconds)
    started = time.monotonic()
    apply(stack, manifest(policy, WALL), campaign_body(WALL, profile, WALL, stages, names))
    done_at: dict[str, float] = {}
    state: dict[str, Any] = {}
    last_print = 0.0
    while time.monotonic() - started < args.timeout:
        state = await progress(client, WALL)
        now = time.monotonic() - started
        for cluster, report in (state.get("clusters") or {}).items():
            if report.get("phase") == "Complete" and cluster not in done_at:
                done_at[cluster] = now
        if state.get("phase") in FINAL:
            break
        if now - last_print > 30:
            last_print = now
            shown = ", ".join(
                f"{c} {r.get('phase')} {r.get('updated', 0)}/{r.get('targeted', 0)}"
                for c, r in (state.get("clusters") or {}).items()
            )
            print(f"  {now:6.0f}s  {state.get('phase', '-')}: {shown}  (load {loadavg()})", flush=True)
        await asyncio.sleep(1)
    seconds = time.monotonic() - started
    ends = [max(done_at.get(c, seconds) for c in stage["clusters"]) for stage in stages]
    spans = [end - begin for begin, end in zip([0.0, *ends], ends, strict=False)]
    rows = [(str(s["name"]), span, ideals[s["name"]]) for s, span in zip(stages, spans, strict=True)]
    stack.cluster.kubectl("delete", "campaign", WALL, "--wait=false")
    return Wall(str(state.get("phase")), seconds, sum(ideals.values()), rows)


# ----- the halt across clusters -----------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
    failing: str
    stage: str
    reported: float
    """failed stage pod -> the last cluster report recorded in the campaign's history before it
    paused its rollouts (the failing cluster's, unless another reported in between)."""
    paused: float
    """failed stage pod -> the campaign's workflow task that signalled the pause completed."""
    refused: dict[str, float]
    """other cluster -> failed stage pod until its rollout handled the pause."""
    started_between: int
    """Node starts in the other clusters after the failure, before their pause took effect."""
    late_starts: int
    """Node starts in the other clusters after their pause took effect: should be 0."""


def failed_at(cluster: LocalCluster, namespace: str, profile: str, within: float) -> float:
    """Poll the profile's stage pods every 50 ms until one failed: the time.time() it was seen."""
    core = k8s.CoreV1Api(from_kubeconfig(cluster.kubeconfig))
    selector = f"{keys.PROFILE_LABEL}={profile}"
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        if any(p.status is not None and p.status.phase == "Failed" for p in pods):
            return time.time()
        time.sleep(0.05)
    raise SystemExit(f"{profile}: no stage pod failed within {within:.0f}s")


async def pause_sent(client: Client, name: str) -> tuple[float, float]:
    """From the campaign's history: the last cluster report before it paused its rollouts, and
    the completion of the workflow task that sent the first pause (epoch seconds)."""
    history = await client.get_workflow_handle(campaign_workflow_id(name)).fetch_history()
    reported = task_done = last_task = 0.0
    for event in history.events:
        at = event.event_time.ToMicroseconds() / 1e6
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED and not task_done:
            if event.workflow_execution_signaled_event_attributes.signal_name == CLUSTER_PROGRESS_SIGNAL:
                reported = at
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            last_task = at
        elif event.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            signal = event.signal_external_workflow_execution_initiated_event_attributes.signal_name
            if signal == "pause" and not task_done:
                task_done = last_task
    if not task_done:
        raise SystemExit(f"campaign {name}: no pause sent in its history")
    return reported, task_done


async def wait_phase(client: Client, name: str, phase: str, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if (await progress(client, name)).get("phase") == phase:
            return
        await asyncio.sleep(0.5)
    raise SystemExit(f"campaign {name}: not {phase} within {within:.0f}s")


async def trial(stack: LocalStack, client: Client, index: int, rng: random.Random) -> Trial:
    clusters = clusters_of(stack)
    names = list(clusters)
    failing = names[index % len(names)]
    name = f"halt-{index}"
    # The failing cluster's trial nodes are new ones (names no other cluster's trial nodes carry),
    # the others' are four of their first nodes.
    fresh = clusters[failing].add_nodes(NODES_PER_TRIAL)
    for cluster_name, cluster in clusters.items():
        group = (
            fresh
            if cluster_name == failing
            else [node_name(i) for i in range(index * NODES_PER_TRIAL, (index + 1) * NODES_PER_TRIAL)]
        )
        cluster.kubectl("label", "nodes", *group, f"{GROUP}={name}", "--overwrite")
    stage = rng.choice(FAILING_STAGES)
    profile = examples.profile(name, selector={GROUP: name})
    failing_nodes = EnvVar(name="SIM_FAIL_STAGE_ON", value=",".join(f"{stage}@{n}" for n in fresh))
    package = profile.spec.packages[0].model_copy(update={"env": [failing_nodes]})
    profile = profile.model_copy(update={"spec": profile.spec.model_copy(update={"packages": [package]})})
    policy = examples.policy(name, max_unavailable=1, steps=TRIAL_STEPS)
    apply(
        stack,
        manifest(policy, name),
        campaign_body(name, profile, name, [{"name": "all", "clusters": names}], names),
    )
    namespace = stack.options.engine.package_namespace
    failure = await asyncio.to_thread(
        failed_at, clusters[failing], namespace, member_profile(name, failing), 180
    )
    await wait_phase(client, name, "Halted", 60)
    await asyncio.sleep(10)  # long enough for any start the pause failed to stop
    reported, paused = await pause_sent(client, name)
    refused, between, late = {}, 0, 0
    for other in (n for n in names if n != failing):
        handled = await pause_handled(client, rollout_workflow_id(member_profile(name, other)))
        refused[other] = handled.in_effect_at - failure
        between += sum(1 for s in handled.starts if failure < s <= handled.in_effect_at)
        late += sum(1 for s in handled.starts if s > handled.in_effect_at)
    stack.cluster.kubectl("delete", "campaign,deploymentpolicy", name, "--wait=false")
    return Trial(failing, stage, reported - failure, paused - failure, refused, between, late)


# ----- report -------------------------------------------------------------------------------
def summary(measured: Wall, trials: list[Trial], args: argparse.Namespace, load_start: str) -> list[str]:
    ratio = measured.seconds / measured.ideal
    lines = [
        f"campaign over {args.clusters} clusters of {args.nodes} nodes ({measured.phase}): "
        f"wall {measured.seconds:.0f} s / ideal {measured.ideal:.0f} s = {ratio:.2f} (target <= 1.2)",
        *(
            f"  stage {s}: {span:.0f} s / ideal {ideal:.0f} s = {span / ideal:.2f}"
            for s, span, ideal in measured.stages
        ),
    ]
    last = [max(t.refused.values()) for t in trials]
    every = [v for t in trials for v in t.refused.values()]
    lines += [f"halt trials: {len(trials)} (p99 of {len(trials)} trials is their maximum)"]
    lines += spread_lines(
        (
            (
                "failed stage pod -> the campaign has the failing cluster's report",
                [t.reported for t in trials],
            ),
            ("failed stage pod -> the campaign sent the pause", [t.paused for t in trials]),
            ("failed stage pod -> each other cluster refuses new starts", every),
            ("failed stage pod -> the last other cluster refuses", last),
        ),
        64,
    )
    lines += [
        f"target: p99 of the last <= 5 s: {'met' if percentile(last, 99) <= 5 else 'not met'}",
        "node starts in other clusters between the failure and their refusal: "
        f"{sum(t.started_between for t in trials)}",
        f"node starts after a cluster refused (should be 0): {sum(t.late_starts for t in trials)}",
        load_line(load_start),
        "reproduce: .venv/bin/python bench/campaign.py "
        f"--nodes {args.nodes} --max-unavailable {args.max_unavailable} "
        f"--stage-seconds {args.stage_seconds:g} "
        f"--trials {args.trials} --trial-stage-seconds {args.trial_stage_seconds:g}",
    ]
    return lines


async def run(args: argparse.Namespace) -> None:
    rundir = Path(args.workdir or f"/tmp/fleetwright-bench-campaign-{int(time.time())}")
    options = StackOptions(
        cluster=ClusterOptions(
            nodes=args.nodes, node_lease_seconds=node_lease_seconds(args.nodes * args.clusters)
        ),
        workdir=rundir,
        engine=engine(args.stage_seconds),
        clusters=args.clusters,
        ui=False,
        webhook=False,
        gpu_metrics=False,
        registry=False,
    )
    began = time.monotonic()
    with LocalStack(options) as stack:
        print(
            f"{args.clusters} clusters of {args.nodes} nodes up in {time.monotonic() - began:.0f}s; "
            f"work dir {rundir}",
            flush=True,
        )
        client = await connect(stack.temporal.address, stack.temporal.namespace)
        load_start = loadavg()
        measured = await wall(stack, client, args)
        print(f"  wall: {measured}", flush=True)
        stack.configure(engine(args.trial_stage_seconds))
        rng = random.Random(args.trials)
        trials = []
        for index in range(args.trials):
            result = await trial(stack, client, index, rng)
            print(f"  trial {index}: {result}  (load {loadavg()})", flush=True)
            trials.append(result)
    print("\n".join(summary(measured, trials, args, load_start)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=100, help="simulated nodes per cluster")
    parser.add_argument("--max-unavailable", type=int, default=20)
    parser.add_argument("--stage-seconds", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--trial-stage-seconds", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="at most this long for the campaign")
    parser.add_argument("--workdir", default="")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    # In-process clients on the SDK runtime: end as the fleetwright commands do.
    run_and_exit(main)
