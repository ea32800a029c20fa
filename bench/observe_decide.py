"""Benchmark: one rollout turn (the observe-and-decide activity) on a large fleet with pods, p50 and
p99, for a policy with ``workloadOrder: false`` (no pod read) and for one with the workload
order, ``workloadLabel`` and ``workloadWait``; the pod lists each turn made, counted by the
apiserver; and the pod list alone, whole pods as JSON against the Table of their metadata a turn
asks for.

Reproduce from the repository root with:  .venv/bin/python bench/observe_decide.py   (--nodes,
--pods-per-node, --turns, --list-rounds)

The local control plane (kube-apiserver, etcd, kube-controller-manager, kwok) with ``--nodes``
kwok nodes, each running ``--pods-per-node`` pods (kwok plays them Running): one pod of a JobSet
gang (four nodes, 8 GPUs each) and the rest service pods. The NodeProfile targets every node; the
policy starts with a one-node canary, so a turn is the fleet's reads, the planner over every node
and one start claim. Turns of the two policies alternate, each on the activity's thread as the
worker runs it (``RolloutActivities.observe_and_decide``); the claim is dropped between turns,
outside the timing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

if not __package__:  # run as a file (python bench/observe_decide.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import load_line, loadavg, node_lease_seconds, spread_lines
from fleetwright.activities import nodeprogress
from fleetwright.activities.payloads import DecideRequest
from fleetwright.activities.rollout import RolloutActivities
from fleetwright.api.crdgen import CRDS, rendered_files
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.kube import inventory, workloads
from fleetwright.kube.client import ApiClient, from_kubeconfig, send
from fleetwright.local import examples
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.kubectl import wait_established
from fleetwright.local.nodes import OUTCOME_LABEL
from fleetwright.local.processes import wait_until
from fleetwright.planner import convert
from fleetwright.planner.rollout.lifecycle import begin

NAMESPACE = "bench-pods"
GANG_LABEL = "jobset.sigs.k8s.io/jobset-name"
GANG_NODES = 4
CREATE_THREADS = 8
STEPS = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 32}},
]
POLICIES = {
    "workloadOrder false": examples.policy(max_unavailable=32, steps=STEPS, workload_order=False),
    "workload order + workloadLabel + workloadWait": examples.policy(
        max_unavailable=32,
        steps=STEPS,
        workload_label="example.com/training-run",
        # Pods about to finish carry this label; none does here, so no node is held.
        workload_wait={"selector": {"matchLabels": {"example.com/finishing": "true"}}, "timeoutSeconds": 600},
    ),
}


def pod(node: str, index: int, slot: int) -> dict[str, Any]:
    """Pod ``slot`` of node ``index``: slot 0 a gang member with 8 GPUs, the others services."""
    labels = {OUTCOME_LABEL: "hang", "app": f"svc-{slot}", "app.kubernetes.io/part-of": "bench"}
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    if slot == 0:
        labels = {OUTCOME_LABEL: "hang", GANG_LABEL: f"train-{index // GANG_NODES}"}
        resources = {"limits": {"nvidia.com/gpu": "8"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{node}-{slot:02d}", "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example.com/{labels.get('app', 'train')}:1.4.2",
                    "env": [{"name": "ROLE", "value": labels.get("app", "train")}],
                    "resources": resources,
                }
            ],
        },
    }


def add_pods(cluster: LocalCluster, api: ApiClient, nodes: list[str], per_node: int) -> int:
    """Create the pods (``CREATE_THREADS`` at a time) and wait until kwok has played them all."""
    cluster.kubectl("create", "namespace", NAMESPACE)
    core = k8s.CoreV1Api(api)
    bodies = [pod(node, i, slot) for i, node in enumerate(nodes) for slot in range(per_node)]

    def create(body: dict[str, Any]) -> None:
        send(core.create_namespaced_pod, NAMESPACE, body)

    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(create, bodies))
    wait_until(
        lambda: running(api) >= len(bodies),
        timeout=max(120.0, len(bodies) / 20),
        what=f"{len(bodies)} pods Running",
        interval=5.0,
    )
    return len(bodies)


def running(api: ApiClient) -> int:
    pods = inventory.list_items(api, "pods", namespace=NAMESPACE, timeout_seconds=None)
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")


def pod_lists(cluster: LocalCluster) -> int:
    """The apiserver's count of pod LIST requests so far."""
    status, body = cluster.get("/metrics", timeout=30.0)
    if status != 200:
        raise RuntimeError(f"apiserver /metrics answered {status}")
    total = 0
    for line in body.decode().splitlines():
        counted = line.startswith("apiserver_request_total{") and 'verb="LIST"' in line
        if counted and 'resource="pods"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def request(profile: NodeProfile, policy: DeploymentPolicy) -> DecideRequest:
    now = datetime.now(UTC)
    return DecideRequest(now=now, profile=profile, state=begin(convert.rollout_spec(profile, policy), now))


@contextmanager
def fleet(nodes: int, per_node: int) -> Iterator[tuple[LocalCluster, ApiClient, int]]:
    options = ClusterOptions(
        nodes=nodes,
        node_lease_seconds=node_lease_seconds(nodes),
        startup_timeout=600,
    )
    with LocalCluster(options) as cluster:
        cluster.kubectl("apply", "-f", "-", input="---\n".join(rendered_files().values()))
        wait_established(cluster.kubectl, [spec.name for spec in CRDS])
        api = from_kubeconfig(cluster.kubeconfig)
        names = sorted(cluster.kubectl("get", "nodes", "-o", "name").stdout.split())
        pods = add_pods(cluster, api, [n.removeprefix("node/") for n in names], per_node)
        yield cluster, api, pods


def measure(
    cluster: LocalCluster, api: ApiClient, turns: int
) -> dict[str, tuple[list[float], list[float], float]]:
    """label -> (wall seconds per turn, activity CPU seconds per turn, pod lists per turn)."""
    profile = examples.profile("bench", selector={"type": "kwok"})
    activities = RolloutActivities(api)
    found: dict[str, tuple[list[float], list[float], float]] = {}
    lists: dict[str, int] = dict.fromkeys(POLICIES, 0)
    for label in POLICIES:
        found[label] = ([], [], 0.0)
    for _ in range(turns):
        for label, policy in POLICIES.items():
            decide = request(profile, policy)
            before = pod_lists(cluster)
            cpu, started = time.thread_time(), time.perf_counter()
            report = activities.observe_and_decide(decide)
            found[label][0].append(time.perf_counter() - started)
            found[label][1].append(time.thread_time() - cpu)
            lists[label] += pod_lists(cluster) - before
            for start in report.decision.start:
                nodeprogress.release(api, profile=profile.metadata.name, node=start.node)
    return {label: (wall, cpu, lists[label] / turns) for label, (wall, cpu, _) in found.items()}


def lists(api: ApiClient, rounds: int) -> dict[str, tuple[list[float], list[float]]]:
    """The pod list alone, whole pods as JSON (``running_pods``, the plan preview's and the turn's
    before) against the Table of their metadata (``bound_pods``, the turn's): wall and CPU seconds."""
    found: dict[str, tuple[list[float], list[float]]] = {"JSON": ([], []), "Table": ([], [])}
    for _ in range(rounds):
        for label, list_pods in (("JSON", workloads.running_pods), ("Table", workloads.bound_pods)):
            cpu, started = time.thread_time(), time.perf_counter()
            list_pods(api)
            found[label][0].append(time.perf_counter() - started)
            found[label][1].append(time.thread_time() - cpu)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--turns", type=int, default=8, help="turns per policy (alternating)")
    parser.add_argument("--list-rounds", type=int, default=3, help="pod lists of each representation")
    args = parser.parse_args()
    started = time.monotonic()
    with fleet(args.nodes, args.pods_per_node) as (cluster, api, pods):
        load_start = loadavg()
        print(f"fleet: {args.nodes} kwok nodes, {pods} pods, ready in {time.monotonic() - started:.0f} s")
        results = measure(cluster, api, args.turns)
        listed = lists(api, args.list_rounds)
    rows = tuple((f"turn, {label}", wall) for label, (wall, _, _) in results.items())
    rows += tuple((f"  its thread's CPU, {label}", cpu) for label, (_, cpu, _) in results.items())
    rows += tuple((f"pod list alone, {label}", wall) for label, (wall, _) in listed.items())
    rows += tuple((f"  its CPU, {label}", cpu) for label, (_, cpu) in listed.items())
    lines = [f"{args.turns} turns per policy (p99 of {args.turns} turns is their maximum)"]
    lines += spread_lines(rows, 52)
    lines += [f"pod lists per turn, {label}: {lists:g}" for label, (_, _, lists) in results.items()]
    lines += [
        load_line(load_start),
        f"reproduce: .venv/bin/python bench/observe_decide.py --nodes {args.nodes} "
        f"--pods-per-node {args.pods_per_node} --turns {args.turns} --list-rounds {args.list_rounds}",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
