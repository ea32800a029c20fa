"""Benchmark: a real rollout on the local control plane versus the planner's ideal schedule.

Reproduce from the repository root with:  .venv/bin/python bench/rollout.py   (--nodes 1000 by
default; --nodes 5000 / 10000, --max-unavailable, --stage-seconds, --interrupt none for a package
that runs apply and config beside the workloads: no cordon, drain or reboot)

Real etcd, kube-apiserver, kube-controller-manager and kwok nodes; the Temporal dev server, or
with ``--temporal postgres`` temporal-server on PostgreSQL (built and installed by tools/setup.sh); the
worker and the controller as their own processes (``bench/serve.py``; the worker as two, one for the
workflows and one for the activities, as the chart's ``workflowWorker`` runs it, unless
``--worker-processes 1``); the NodeProfile and
DeploymentPolicy applied with kubectl, as a user would. Every package stage pod completes after
``--stage-seconds`` (kwok), every interrupt reboots the node. The ideal schedule is the planner's
own preview of the same rollout with those stage durations and zero overhead; wall time / ideal is
fleetwright's overhead. Also printed: API requests per node by verb and resource (the apiserver's
``apiserver_request_total``), write requests per node by who made them (the audit log), the largest
workflow history, the history events and workflow tasks per node over every workflow run, peak RSS
of the worker and controller, CPU seconds per process and fleetwright's own share of them (its
processes, the Temporal server and its database) per node, how busy the
machine's cores were (sampled each second) and how fast they were (a calibration before and after),
where a node's time goes (``bench/nodetimes.py``, from a sample of node workflow histories) and
around its stage Jobs (``bench/jobtimes.py``, from the audit log), the Temporal server's own
counters per node, and with ``--profile`` where each fleetwright process's CPU went
(``bench/profiling.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fleetwright.local import examples
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.local.temporalserver import Backend
from fleetwright.planner import convert
from fleetwright.planner.node.durations import StageDurations
from fleetwright.planner.rollout.observations import Observations
from fleetwright.planner.rollout.preview import preview
from fleetwright.planner.rollout.snapshot import observe_fleet
from fleetwright.process.shutdown import run_and_exit
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.payloads import RolloutInput

if not __package__:  # run as a file (python bench/rollout.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import (
    TEMPORAL_COUNTERS,
    WRITE_VERBS,
    MachineBusy,
    Stack,
    audit_table,
    calibrate,
    loadavg,
    manifest,
    node_patches,
    peak_rss_mib,
    per_node_lines,
    percentile,
    published_progress,
)
from bench.jobtimes import job_lines, job_times, reactions
from bench.nodetimes import NodeTimes, breakdown_lines, node_times
from bench.profiling import Profiles

PROFILE = "bench"
STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "exponential", "initial": 2, "growthFactor": 2}},
]
FINAL = ("Complete", "Halted", "Failed")
# Node workflow histories read for the per-node profile (evenly spread over the rollout).
NODE_SAMPLE = 300
# What fleetwright costs to run: its processes (bench.harness.Stack's names) and the Temporal
# server with its database; the rest simulates the cluster and the fleet.
OWN_PROCESSES = ("worker", "worker-workflows", "worker-activities", "controller", "temporal", "postgres")
WORKFLOW_TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
TEMPORAL_SHAPE = {
    Backend.DEV: "dev server (sqlite)",
    Backend.POSTGRES: "temporal-server on PostgreSQL",
}


def ideal_seconds(rollout: RolloutInput, nodes: list[dict[str, Any]], stage: float) -> float:
    """The planner's preview, with each stage costing ``stage`` seconds and nothing else.

    The preview rounds to a one-minute grid, so durations are given in minutes (x60) and the
    resulting span read back as seconds: budget and batch arithmetic do not depend on the unit."""
    unit = max(1, round(stage))
    durations = StageDurations(
        apply=unit * 60,
        upgrade=unit * 60,
        config=unit * 60,
        post_interrupt=unit * 60,
        uninstall=unit * 60,
        reboot=unit * 60,
        restart_all_services=unit * 60,
        service=unit * 60,
        drain=0,
        overhead=0,
    )
    spec = convert.rollout_spec(rollout.profile, rollout.policy, durations)
    name = rollout.profile.metadata.name
    observed = observe_fleet(nodes, name, lambda labels: convert.targets(rollout.profile, labels))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    plan = preview(spec, Observations(nodes=observed), start)
    if plan.eta is None:
        raise SystemExit("the planner found no work to do")
    return (plan.eta - start).total_seconds() / 60 * (stage / unit)


def _rusage_seconds(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def manifests(rollout: RolloutInput) -> str:
    # The apiserver owns uid and generation: the bodies carry the names only.
    items = [manifest(model, model.metadata.name) for model in (rollout.policy, rollout.profile)]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def engine(stage_seconds: float, stages: dict[str, float] | None = None) -> EngineSettings:
    """The bench's engine: stage pods run ``stage_seconds`` (``stages``: per stage, see
    ``stage_pod_timing``)."""
    return EngineSettings(
        observe_interval_seconds=5,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        stage_pod_annotations=stage_pod_timing(stage_seconds, stages=stages),
    )


async def wait_done(client: Client, within: float, busy: MachineBusy) -> dict[str, Any]:
    started = time.monotonic()
    last_print = 0.0
    state: dict[str, Any] = {}
    while time.monotonic() - started < within:
        state = await published_progress(client, PROFILE)
        if state.get("phase") in FINAL:
            return state
        if time.monotonic() - last_print > 30:
            last_print = time.monotonic()
            print(
                f"  {time.monotonic() - started:6.0f}s  {state.get('phase', '-')} "
                f"{state.get('updated', 0)}/{state.get('targeted', 0)} updated, "
                f"{state.get('running', 0)} running  (load {loadavg()})",
                flush=True,
            )
        await asyncio.sleep(1)
        busy.sample()
    # Out of time: report what was measured so far (per node = per node started).
    print(f"  no final phase within {within:.0f}s: reporting the rollout so far", flush=True)
    return state


@dataclass
class Histories:
    """Every workflow run's history: the largest, and the events and workflow tasks of all."""

    largest: int = 0
    largest_id: str = ""
    runs: int = 0
    events: int = 0
    workflow_tasks: int = 0


async def histories(client: Client) -> Histories:
    """Reads every run's history (a workflow task is one completed decision of a worker)."""
    seen = Histories()
    async for execution in client.list_workflows():
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        events = (await handle.fetch_history()).events
        seen.runs += 1
        seen.events += len(events)
        seen.workflow_tasks += sum(e.event_type == WORKFLOW_TASK_COMPLETED for e in events)
        if len(events) > seen.largest:
            seen.largest, seen.largest_id = len(events), execution.id
    return seen


async def sampled_node_times(client: Client) -> list[NodeTimes]:
    """The per-node profile of up to NODE_SAMPLE closed node workflows, spread over the rollout."""
    closed = [
        execution.id
        async for execution in client.list_workflows(
            "WorkflowType='fleetwright.node' AND ExecutionStatus='Completed'"
        )
    ]
    step = max(1, len(closed) // NODE_SAMPLE)
    times = [node_times(await client.get_workflow_handle(i).fetch_history()) for i in closed[::step]]
    return [t for t in times if t is not None]


def report(args: argparse.Namespace, figures: dict[str, Any], lines: list[str]) -> None:
    text = "\n".join(lines)
    print(text, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


def api_lines(
    nodes: int, requests: Counter[tuple[str, str]], audited: Counter[tuple[str, str, str]]
) -> tuple[list[str], dict[str, float]]:
    writes_by_actor: Counter[str] = Counter()
    fleetwright_writes: Counter[tuple[str, str]] = Counter()
    for (who, verb, res), count in audited.items():
        if verb in WRITE_VERBS:
            writes_by_actor[who] += count
            if who in ("fleetwright-worker", "fleetwright-controller"):
                fleetwright_writes[(verb, res)] += count
    reads = Counter({k: v for k, v in requests.items() if k[0] not in WRITE_VERBS})
    writes = Counter({k: v for k, v in requests.items() if k[0] in WRITE_VERBS})
    ours = sum(fleetwright_writes.values()) / nodes
    lines = [
        f"API requests per node, all clients (apiserver_request_total): "
        f"{sum(requests.values()) / nodes:.1f} ({sum(writes.values()) / nodes:.1f} writes)",
        "  writes per node by verb and resource:",
        *per_node_lines(writes, nodes),
        "  reads per node by verb and resource:",
        *per_node_lines(reads, nodes),
        "API write requests per node by client (audit log):",
        *per_node_lines(writes_by_actor, nodes),
        f"  fleetwright (worker + controller): {ours:.2f} writes per node (target <= 15), by verb, resource:",
        *per_node_lines(fleetwright_writes, nodes),
        "API requests per node made by fleetwright, all verbs (audit log):",
        *per_node_lines(
            Counter({k: v for k, v in audited.items() if k[0].startswith("fleetwright-")}), nodes
        ),
    ]
    figures = {
        "fleetwright_writes_per_node": ours,
        **{f"writes_per_node[{k}]": v / nodes for k, v in writes_by_actor.items()},
    }
    return lines, figures


def temporal_lines(counts: Counter[tuple[str, str]], nodes: int) -> list[str]:
    """What the Temporal server did per node, by its own counters (``Stack.temporal_counts``)."""
    lines = []
    for counter, title in (
        ("service_requests", "requests per node to its frontend, by operation"),
        ("persistence_requests", "database calls per node, by operation"),
        ("task_requests", "history service tasks per node, by type"),
    ):
        mine = Counter({what: n for (name, what), n in counts.items() if name == counter})
        lines += [
            f"Temporal server {title}: {sum(mine.values()) / nodes:.1f}",
            *per_node_lines(mine, nodes, minimum=0.05),
        ]
    return lines


async def run(args: argparse.Namespace) -> None:
    bench_started = time.monotonic()
    rundir = Path(args.workdir or f"/tmp/fleetwright-bench-rollout-{args.nodes}-{int(time.time())}")
    rollout = RolloutInput(
        profile=examples.profile(PROFILE, interrupt=None if args.interrupt == "none" else args.interrupt),
        policy=examples.policy(max_unavailable=args.max_unavailable, steps=STEPS),
        settings=engine(args.stage_seconds),
    )
    # Every node in progress holds one activity slot (a stage wait holds no thread), plus headroom
    # for the rollout's own activities.
    slots = max(200, args.max_unavailable + 100)
    split = args.worker_processes == 2
    with Stack(
        args.nodes, rollout.settings, rundir, activity_slots=slots, split_worker=split, backend=args.temporal
    ) as stack:
        up = time.monotonic() - bench_started
        print(
            f"stack with {args.nodes} nodes up in {up:.1f}s (load {loadavg()}); work dir {rundir}", flush=True
        )
        nodes = json.loads(stack.cluster.kubectl("get", "nodes", "-o", "json", timeout=600).stdout)["items"]
        ideal = ideal_seconds(rollout, nodes, args.stage_seconds)
        client = await connect(stack.temporal.address, stack.temporal.namespace)
        requests_before, audit_offset = stack.request_counts(), stack.audit_offset()
        temporal_before = stack.temporal_counts()
        cpu_before, children_before = stack.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN)
        own_before = resource.getrusage(resource.RUSAGE_SELF)
        load_start, speed_start = loadavg(), calibrate()
        profiles = Profiles(stack.python_pids(), rundir / "profiles") if args.profile else None
        if profiles is not None:
            profiles.start()
        started = time.monotonic()
        stack.cluster.kubectl("apply", "-f", "-", input=manifests(rollout))
        busy = MachineBusy()
        final = await wait_done(client, args.timeout or 4 * ideal + 900, busy)
        wall = time.monotonic() - started
        if profiles is not None:
            profiles.stop()
        load_end, speed_end = loadavg(), calibrate()
        cpu_after, children_after = stack.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN)
        own_after = resource.getrusage(resource.RUSAGE_SELF)
        rss = {name: peak_rss_mib(pid) for name, pid in stack.pids().items()}
        requests = stack.request_counts() - requests_before
        temporal_work = stack.temporal_counts() - temporal_before
        events = stack.audited_since(audit_offset)
        audited, patches = audit_table(events), node_patches(events)
        seen = await histories(client)
        sampled = await sampled_node_times(client)
    cpu = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
    cpu["kubectl (bench children)"] = _rusage_seconds(children_after) - _rusage_seconds(children_before)
    cpu["bench process (simulated kubelet, progress reads)"] = _rusage_seconds(own_after) - _rusage_seconds(
        own_before
    )
    complete = final.get("phase") in FINAL
    measured = args.nodes if complete else max(1, final.get("updated", 0) + final.get("running", 0))
    api, api_figures = api_lines(measured, requests, audited)
    api += ["  fleetwright's Node patches per node by what they touch:", *per_node_lines(patches, measured)]
    api += temporal_lines(temporal_work, measured)
    if not complete:
        api.insert(0, f"INCOMPLETE: per-node figures are per node started ({measured}), partly done")
    # One activity runs all of a node's stages: the tuning package's 4 with an interrupt, 2 without.
    stages = 2 if args.interrupt == "none" else 4
    profile = breakdown_lines(sampled, stages * args.stage_seconds)
    jobs = job_times(events)
    reaction = reactions(jobs, events)
    profile += job_lines(jobs, reaction, args.stage_seconds)
    reproduce = (
        f".venv/bin/python bench/rollout.py --nodes {args.nodes} --max-unavailable {args.max_unavailable} "
        f"--stage-seconds {args.stage_seconds:g} --interrupt {args.interrupt} "
        f"--worker-processes {args.worker_processes} --temporal {args.temporal}"
        + (" --profile" if args.profile else "")
    )
    own = {name: cpu[name] for name in cpu if name in OWN_PROCESSES}
    figures = {
        "nodes": args.nodes,
        "interrupt": args.interrupt,
        "worker_processes": args.worker_processes,
        "temporal": args.temporal,
        "own_cpu_seconds_per_node": sum(own.values()) / measured,
        "phase": final.get("phase"),
        "updated": final.get("updated"),
        "wall_seconds": wall,
        "ideal_seconds": ideal,
        "ratio": wall / ideal,
        "largest_history": seen.largest,
        "largest_history_workflow": seen.largest_id,
        "workflow_runs": seen.runs,
        "history_events_per_node": seen.events / measured,
        "workflow_tasks_per_node": seen.workflow_tasks / measured,
        "own_cpu_seconds": own,
        "peak_rss_mib": rss,
        "cpu_seconds": cpu,
        "calibration_cpu_ms": [speed_start, speed_end],
        "machine_busy_mean": busy.mean(),
        "machine_saturated_fraction": busy.saturated(),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        **api_figures,
        **{
            f"temporal_per_node[{name}]": sum(n for (c, _), n in temporal_work.items() if c == name)
            / measured
            for name in TEMPORAL_COUNTERS
        },
        "node_wall_seconds_p50": percentile([t.wall for t in sampled], 50) if sampled else None,
        **{
            f"node_orchestration_seconds_p{q}": (
                percentile([t.wall - t.ran - t.queued for t in sampled], q) if sampled else None
            )
            for q in (50, 90)
        },
        **{
            f"reaction_{part}_seconds_p50": percentile(values, 50) if values else None
            for part, values in (
                ("next_stage", reaction.next_stage),
                ("shown_complete", reaction.shown_complete),
            )
        },
        "reproduce": reproduce,
    }
    lines = [
        f"nodes:            {args.nodes}, maxUnavailable {args.max_unavailable}, "
        f"{args.stage_seconds:g} s per stage, interrupt {args.interrupt}, {slots} worker activity slots"
        + (", workflows and activities in two worker processes" if split else "")
        + f"; Temporal: {TEMPORAL_SHAPE[args.temporal]}",
        f"phase:            {final.get('phase')} ({final.get('updated')}/{final.get('targeted')} nodes)",
        f"wall time:        {wall:.1f} s (kubectl apply -> rollout Complete)",
        f"ideal schedule:   {ideal:.1f} s (planner preview, {args.stage_seconds:g} s per stage, no overhead)",
        f"overhead ratio:   {wall / ideal:.3f} (target <= 1.05)"
        + ("" if complete else " INCOMPLETE: a lower bound"),
        f"largest history:  {seen.largest} events ({seen.largest_id}; {seen.runs} workflow runs) "
        "(target <= 10,000)",
        f"Temporal work:    {seen.events / measured:.1f} history events and "
        f"{seen.workflow_tasks / measured:.1f} workflow tasks per node "
        f"(all {seen.runs} workflow runs, the rollout's included)",
        "peak RSS (VmHWM): " + ", ".join(f"{k} {v:.0f} MiB" for k, v in rss.items()),
        "CPU seconds during the rollout: "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])),
        f"  total {sum(cpu.values()):.0f} CPU s over {wall:.0f} s wall "
        f"= {sum(cpu.values()) / wall:.2f} cores busy",
        "fleetwright's own CPU (its processes and the Temporal server with its database): "
        + " + ".join(f"{k} {v:.1f}" for k, v in sorted(own.items(), key=lambda kv: -kv[1]))
        + f" = {sum(own.values()):.1f} s = {sum(own.values()) / measured:.3f} s per node (target <= 0.08)",
        busy.line(),
        f"machine speed:    {speed_start:.0f} ms before, {speed_end:.0f} ms after, of CPU for the fixed "
        "calibration work (bench.harness.calibrate; lower is faster)",
        *api,
        *profile,
        *(profiles.lines() if profiles is not None else []),
        f"load average:     {load_start} at start, {load_end} at end (2 cores shared with other work)",
        f"total bench time: {time.monotonic() - bench_started:.1f} s",
        f"reproduce:        {reproduce}",
    ]
    report(args, figures, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--max-unavailable", type=int, default=100)
    parser.add_argument("--stage-seconds", type=float, default=10.0)
    parser.add_argument(
        "--interrupt",
        choices=("reboot", "none"),
        default="reboot",
        help="the package's interrupt: reboot (cordon, drain, 4 stages) or none (2 stages, no cordon)",
    )
    parser.add_argument(
        "--worker-processes",
        type=int,
        choices=(1, 2),
        default=2,
        help="2: the workflows and the activities in two worker processes (worker_role); 1: one",
    )
    parser.add_argument(
        "--temporal",
        type=Backend,
        choices=list(Backend),
        default=Backend.DEV,
        help="dev: the dev server (sqlite); postgres: temporal-server on PostgreSQL",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample the workers and the controller with py-spy during the rollout (bench/profiling.py)",
    )
    parser.add_argument("--timeout", type=float, default=0.0, help="seconds; default 4x the ideal + 15 min")
    parser.add_argument("--workdir", default="", help="keeps logs, audit log and stores (default under /tmp)")
    parser.add_argument("--json", default="", metavar="PATH", help="also write the figures to PATH as JSON")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    # In-process workers and clients on the SDK runtime: end as the fleetwright commands do, without
    # the interpreter finalization its threads can abort.
    run_and_exit(main)
