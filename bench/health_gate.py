"""Benchmark: the node health gate with a real Prometheus — detection latency (a GPU's XID series
changes on a node at its gate -> the node Failed, and -> the rollout Halted), p50 and p99, the
time a passing gate adds to a node, and the time its validation Job takes beyond its container's.

Reproduce from the repository root with:  .venv/bin/python bench/health_gate.py   (--trials,
--count, --interval, --no-validation)

The stack of ``bench/rollout.py`` (control plane, Temporal, the worker and controller as processes,
the simulated kubelet) plus the local GPU metrics: Debian's Prometheus scraping the GPU exporter
every second. Each trial rolls its own profile (``tuning`` with a reboot, one node at a time) to
two nodes of its own under a node gate of one validation container (a Job on the node; the
simulated kubelet runs every pod for 1 s) then one check, ``changes()`` of the XID gauge measured
``--count`` times ``--interval`` seconds apart, halt on failure. The first node passes: the time
from its stages' end to its uncordon (from its workflow history) is what the gate added, and its
run-validation activity's span minus the container's second is what a validation Job costs. At the
second node's gate (its condition says HealthGate) the bench waits a random part of one interval,
sets an XID on one of its GPUs and polls every 20 ms for the node's HealthGateFailed condition and
the NodeProfile's Halted phase.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fleetwright.activities.payloads import NAMES
from fleetwright.api.common import VERSION
from fleetwright.api.keys import GROUP as API_GROUP
from fleetwright.api.keys import NodeReason, condition_type
from fleetwright.kube.client import ApiClient
from fleetwright.local import examples
from fleetwright.local.gpuexporter import XID_ERRORS
from fleetwright.local.gpumetrics import GpuMetrics
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.process.shutdown import run_and_exit
from fleetwright.process.temporalclient import connect
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id

if not __package__:  # run as a file (python bench/health_gate.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import Stack, load_line, loadavg, manifest, spread_lines

GROUP = "bench.fleetwright.io/group"
NODES_PER_TRIAL = 2
POD_SECONDS = 1.0
"""How long the simulated kubelet runs each stage and validation pod."""
VALIDATION_IMAGE = "ghcr.io/fleetwright/packages/gpu-health:1.0.0"


@dataclass(frozen=True)
class Trial:
    gate_added: float
    """The healthy node: its stages' end -> its uncordon scheduled (the gate's whole time)."""
    node_failed: float
    """XID set -> the node's condition says HealthGateFailed."""
    halted: float
    """XID set -> the NodeProfile's status says Halted."""
    validation: float | None
    """The healthy node's validation: its activity scheduled -> completed, less the container's run."""


def manifests(name: str, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    profile = examples.profile(name, interrupt="reboot", selector={GROUP: name}, policy=name)
    policy = examples.policy(name, max_unavailable=1, steps=[{"name": "one", "batches": {"initial": 1}}])
    check = {
        "name": "gpu-xid-errors",
        "query": f'changes({XID_ERRORS}{{Hostname="{{{{node}}}}"}}[{args.window}])',
        "successCondition": "all(r == 0 for r in result)",
        "failureCondition": "any(r > 0 for r in result)",
        "count": args.count,
        "intervalSeconds": args.interval,
    }
    spec = policy.spec.model_dump(by_alias=True, exclude_none=True)
    gate: dict[str, Any] = {"checks": ["gpu-xid-errors"]}
    if args.validation:
        gate["validations"] = [{"name": "diag", "image": VALIDATION_IMAGE, "timeoutSeconds": 300}]
    spec |= {"healthChecks": [check], "nodeGate": gate}
    policy = policy.model_copy(update={"spec": type(policy.spec).model_validate(spec)})
    return manifest(policy, name), manifest(profile, name)


def reason(core: k8s.CoreV1Api, node: str, profile: str) -> str:
    status = core.read_node(node).status
    for condition in (status.conditions if status else None) or []:
        if condition.type == condition_type(profile):
            return str(condition.reason or "")
    return ""


def wait_for(check: Any, what: str, within: float = 600) -> float:
    """Poll ``check`` every 20 ms until it is true; the time.monotonic() it was."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"not within {within}s: {what}")


def stamp(event: Any) -> float:
    moment: datetime = event.event_time.ToDatetime(tzinfo=datetime.now().astimezone().tzinfo)
    return moment.timestamp()


async def gate_added(client: Client, profile: str, node: str) -> tuple[float, float | None]:
    """From the node workflow's history: the stages' activity completed -> the uncordon scheduled,
    and the run-validation activity's span less its container's run (None without one)."""
    history = await client.get_workflow_handle(node_workflow_id(profile, node)).fetch_history()
    scheduled: dict[int, tuple[str, float]] = {}
    stages_done = uncordon = validation = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            kind = event.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[event.event_id] = (kind, stamp(event))
            if kind == NAMES.UNCORDON:
                uncordon = stamp(event)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            kind, at = scheduled.get(
                event.activity_task_completed_event_attributes.scheduled_event_id, ("", 0)
            )
            if kind == NAMES.RUN_STAGES:
                stages_done = stamp(event)
            elif kind == NAMES.RUN_VALIDATION:
                validation = stamp(event) - at - POD_SECONDS
    if stages_done is None or uncordon is None:
        raise SystemExit(f"{profile}/{node}: no stages' end or uncordon in the node's history")
    return uncordon - stages_done, validation


async def trial(
    stack: Stack, metrics: GpuMetrics, client: Client, api: ApiClient, index: int, args: argparse.Namespace
) -> Trial:
    name = f"gate-{index}"
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    listed = core.list_node(label_selector=f"{GROUP}={name}").items
    nodes = sorted(str(n.metadata.name) for n in listed if n.metadata is not None)
    for node in nodes:
        metrics.exporter.add_node(node, gpus=2)
    policy, profile = manifests(name, args)
    custom.create_cluster_custom_object(API_GROUP, VERSION, "deploymentpolicies", policy)
    custom.create_cluster_custom_object(API_GROUP, VERSION, "nodeprofiles", profile)

    def at_gate() -> str | None:
        return next((n for n in nodes if reason(core, n, name) == NodeReason.HEALTH_GATE), None)

    await asyncio.to_thread(wait_for, at_gate, f"{name}: a node at its gate")
    healthy = at_gate()
    assert healthy is not None
    bad = next(n for n in nodes if n != healthy)
    await asyncio.to_thread(
        wait_for, lambda: reason(core, bad, name) == NodeReason.HEALTH_GATE, f"{name}: {bad} at its gate"
    )
    await asyncio.sleep(random.uniform(0, args.interval))
    set_at = time.monotonic()
    metrics.exporter.set(bad, XID_ERRORS, 79, gpu=1)
    failed_at = await asyncio.to_thread(
        wait_for, lambda: reason(core, bad, name) == NodeReason.GATE_FAILED, f"{name}: {bad} Failed"
    )

    def halted() -> bool:
        obj = custom.get_cluster_custom_object(API_GROUP, VERSION, "nodeprofiles", name)
        status = obj.get("status") if isinstance(obj, dict) else None
        return isinstance(status, dict) and status.get("phase") == "Halted"

    halted_at = await asyncio.to_thread(wait_for, halted, f"{name}: Halted")
    added, validation = await gate_added(client, name, healthy)
    stack.cluster.kubectl("delete", "nodeprofile,deploymentpolicy", name, "--wait=false")
    return Trial(added, failed_at - set_at, halted_at - set_at, validation)


def label_groups(stack: Stack, trials: int) -> None:
    names = sorted(stack.cluster.kubectl("get", "nodes", "-o", "name").stdout.split())
    for i in range(trials):
        group = names[i * NODES_PER_TRIAL : (i + 1) * NODES_PER_TRIAL]
        stack.cluster.kubectl("label", "--overwrite", *group, f"{GROUP}=gate-{i}")


def summary(trials: list[Trial], args: argparse.Namespace, load_start: str, version: str) -> list[str]:
    minimum = args.interval * (args.count - 1) + (POD_SECONDS if args.validation else 0)
    validated = ", after one validation Job" if args.validation else ""
    lines = [
        f"trials: {len(trials)} (p99 of {len(trials)} trials is their maximum); Prometheus {version}, "
        f"scrape every 1 s; check: {args.count} measurements {args.interval} s apart{validated}",
    ]
    spreads = [
        ("XID set -> node Failed (HealthGateFailed)", [t.node_failed for t in trials]),
        ("XID set -> rollout Halted (NodeProfile status)", [t.halted for t in trials]),
        (f"time the gate added to a node (at least {minimum:g} s)", [t.gate_added for t in trials]),
    ]
    if args.validation:
        costs = [t.validation for t in trials if t.validation is not None]
        spreads.append(("a validation Job beyond its container's run", costs))
    lines += spread_lines(tuple(spreads), 52)
    lines += [
        load_line(load_start),
        f"reproduce: .venv/bin/python bench/health_gate.py --trials {args.trials} --count {args.count} "
        f"--interval {args.interval}" + ("" if args.validation else " --no-validation"),
    ]
    return lines


async def run(args: argparse.Namespace) -> None:
    rundir = Path(args.workdir or f"/tmp/fleetwright-bench-gate-{int(time.time())}")
    engine = EngineSettings(
        observe_interval_seconds=30,
        stage_backoff_limit=0,
        drain_poll_seconds=0.5,
        stage_pod_annotations=stage_pod_timing(POD_SECONDS),
    )
    random.seed(args.trials)
    with GpuMetrics(workdir=rundir / "gpumetrics") as metrics:
        stack_args = (args.trials * NODES_PER_TRIAL, engine, rundir)
        with Stack(*stack_args, prometheus_url=metrics.url) as stack:
            label_groups(stack, args.trials)
            client = await connect(stack.temporal.address, stack.temporal.namespace)
            api = stack.api()
            load_start = loadavg()
            results = []
            for i in range(args.trials):
                result = await trial(stack, metrics, client, api, i, args)
                print(f"  trial {i}: {result}  (load {loadavg()})", flush=True)
                results.append(result)
            version = metrics.prometheus.version()
    print("\n".join(summary(results, args, load_start, version)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--count", type=int, default=10, help="measurements of the check")
    parser.add_argument("--interval", type=int, default=2, help="seconds between two measurements")
    parser.add_argument("--window", default="30s", help="the range changes() reads")
    parser.add_argument(
        "--no-validation", dest="validation", action="store_false", help="a gate of the check alone"
    )
    parser.add_argument("--workdir", default="")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    run_and_exit(main)
