"""Benchmark: a real rollout on the local control plane versus the planner's ideal schedule.

Reproduce from the repository root with:  .venv/bin/python bench/rollout.py   (--nodes, --max-unavailable,
--stage-seconds)

Real etcd, kube-apiserver, kube-controller-manager and kwok nodes; the Temporal dev server; one
in-process worker with the real activities. Every package stage pod completes after
``--stage-seconds`` (kwok), every interrupt reboots the node. The ideal schedule is the planner's
own preview of the same rollout with those stage durations and zero overhead: the time the policy
would take if every Job, drain and reboot cost exactly the simulated stage time. Their ratio is
fleetwright's overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

from fleetwright.activities.node import all_activities
from fleetwright.activities.rollout import RolloutActivities
from fleetwright.kube.client import from_kubeconfig
from fleetwright.localcluster import examples
from fleetwright.localcluster.cluster import ClusterOptions, LocalCluster
from fleetwright.localcluster.kubelet import SimulatedKubelet
from fleetwright.localcluster.temporal import LocalTemporal
from fleetwright.planner import convert
from fleetwright.planner.durations import StageDurations
from fleetwright.planner.fleet import observe_fleet
from fleetwright.planner.observations import Observations
from fleetwright.planner.preview import preview
from fleetwright.worker.temporal import build_worker, connect
from fleetwright.workflows.payloads import EngineSettings, RolloutInput
from fleetwright.workflows.rollout import RolloutWorkflow, rollout_workflow_id
from fleetwright.workflows.search import REGISTRATION

STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "exponential", "initial": 2, "growthFactor": 2}},
]


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


async def run(args: argparse.Namespace) -> None:
    wall_started = time.monotonic()
    with (
        LocalCluster(ClusterOptions(nodes=args.nodes)) as cluster,
        LocalTemporal(search_attributes=REGISTRATION, ui=False) as temporal,
    ):
        print(f"control plane with {args.nodes} nodes up in {cluster.startup_seconds:.1f}s")
        api = from_kubeconfig(cluster.kubeconfig)
        client = await connect(temporal.address)
        delay = f"{int(args.stage_seconds * 1000)}ms"
        rollout = RolloutInput(
            profile=examples.profile("bench", interrupt="reboot"),
            policy=examples.policy(max_unavailable=args.max_unavailable, steps=STEPS),
            settings=EngineSettings(
                observe_interval_seconds=5,
                stage_backoff_limit=0,
                drain_poll_seconds=0.5,
                stage_pod_annotations={
                    "pod-complete.stage.kwok.x-k8s.io/delay": delay,
                    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "0s",
                    "pod-ready.stage.kwok.x-k8s.io/delay": "0ms",
                },
            ),
        )
        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        ideal = ideal_seconds(rollout, nodes, args.stage_seconds)
        worker = build_worker(client, [*all_activities(api), RolloutActivities(api).observe_and_decide])
        with SimulatedKubelet(cluster.kubectl):
            async with worker:
                started = time.monotonic()
                handle = await client.start_workflow(
                    RolloutWorkflow.run, rollout, id=rollout_workflow_id("bench"), task_queue="fleetwright"
                )
                while True:
                    progress = await handle.query(RolloutWorkflow.progress)
                    if progress is not None and progress.phase in ("Complete", "Halted"):
                        break
                    await asyncio.sleep(1)
                wall = time.monotonic() - started
                await handle.terminate("benchmark done")
        history = await handle.fetch_history()
    print(f"phase:            {progress.phase} ({progress.updated}/{progress.targeted} nodes)")
    print(f"wall time:        {wall:.1f} s")
    print(
        f"ideal schedule:   {ideal:.1f} s (planner preview, {args.stage_seconds:g} s per stage, no overhead)"
    )
    print(f"overhead ratio:   {wall / ideal:.2f}")
    print(f"rollout history:  {len(history.events)} events (last run)")
    print(f"total bench time: {time.monotonic() - wall_started:.1f} s")
    print(
        "reproduce:        .venv/bin/python bench/rollout.py "
        f"--nodes {args.nodes} --max-unavailable {args.max_unavailable} "
        f"--stage-seconds {args.stage_seconds:g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--max-unavailable", type=int, default=20)
    parser.add_argument("--stage-seconds", type=float, default=5.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
