"""Benchmark: the client CPU of the node activities' Kubernetes calls, per read-and-two-patches (a
node status write: GET the Node, merge-patch a label or annotation, patch a condition through
``nodes/status``), as ``fleetwright.kube.nodestatus`` makes them (the Node as JSON, a patch's answer
dropped unread) and as the generated client's model classes would (every answer built into
``V1Node``).

Reproduce from the repository root with:  .venv/bin/python bench/node_writes.py   (--rounds 300)

A real kube-apiserver and etcd on loopback with two kwok nodes; the figures are this process's
CPU time per round (``time.process_time``), the two ways alternated twice.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client

if not __package__:  # run as a file (python bench/node_writes.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fleetwright.kube import nodestatus
from fleetwright.kube.client import from_kubeconfig
from fleetwright.kube.nodestatus import MERGE_PATCH, STRATEGIC_MERGE_PATCH, NodeFacts, NodeStatusCondition
from fleetwright.local.controlplane import ClusterOptions, LocalCluster

NODE = "gpu-node-0000"
KEY = "bench.fleetwright.io/round"


def as_json(api: client.ApiClient) -> Callable[[int], None]:
    def one(i: int) -> None:
        nodestatus.read_node(api, NODE)
        nodestatus.merge_metadata(api, NODE, annotations={KEY: str(i)})
        condition = NodeStatusCondition(KEY, "Unknown", "Round", str(i))
        nodestatus.set_condition(api, NODE, condition, current=NodeFacts(NODE, "", "", True))

    return one


def as_models(api: client.ApiClient) -> Callable[[int], None]:
    core = client.CoreV1Api(api)

    def one(i: int) -> None:
        node = core.read_node(NODE)
        _ = (node.metadata, node.status)  # what read_node takes from it
        core.patch_node(NODE, {"metadata": {"annotations": {KEY: str(i)}}}, _content_type=MERGE_PATCH)
        entry = {"type": KEY, "status": "Unknown", "reason": "Round", "message": str(i)}
        core.patch_node_status(NODE, {"status": {"conditions": [entry]}}, _content_type=STRATEGIC_MERGE_PATCH)

    return one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    with LocalCluster(ClusterOptions(nodes=2)) as cluster:
        api = from_kubeconfig(cluster.kubeconfig)
        ways = {"JSON (fleetwright.kube)": as_json(api), "client models": as_models(api)}
        for _ in range(2):
            for name, one in ways.items():
                one(0)  # a warm connection
                cpu, wall = time.process_time(), time.monotonic()
                for i in range(args.rounds):
                    one(i + 1)
                cpu, wall = time.process_time() - cpu, time.monotonic() - wall
                per_round = (
                    f"{1000 * cpu / args.rounds:5.2f} ms CPU, {1000 * wall / args.rounds:5.2f} ms wall"
                )
                print(f"{name:24s} {per_round} per GET + two patches ({args.rounds} rounds)", flush=True)
    print(f"reproduce:  .venv/bin/python bench/node_writes.py --rounds {args.rounds}")


if __name__ == "__main__":
    main()
