"""Writes the sample fleet snapshot ``tests/fixtures/fleet-200.json``: a ``kubectl get nodes -o json``
style NodeList of GPU nodes (product, zone, rack labels) whose annotations carry recorded package
state for the profile ``gpu-host`` in every shape the planner must handle.

Deterministic (no randomness, no clock): ``python bench/make_fleet.py`` rewrites the same file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fleetwright.planner.node.packages import config_digests
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import NodePackageState, PackageRecord, PendingChange, format_annotation

PROFILE = "gpu-host"
PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", "NVIDIA-GB200", "NVIDIA-A100-SXM4-80GB")
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
# The config the sample profile wants, and the older one most nodes still carry.
NEW_SYSCTL = {
    "sysctl.conf": "vm.max_map_count=1048576\nnet.core.rmem_max=268435456\n",
    "limits.conf": "* - nofile 1048576\n",
}
OLD_SYSCTL = {"sysctl.conf": "vm.max_map_count=262144\n", "limits.conf": "* - nofile 1048576\n"}


def _records(i: int) -> dict[str, PackageRecord] | None:
    """The recorded state of node ``i``: most nodes are one version behind, some are current, some
    are fresh, some are mid-change or failed."""
    old = config_digests(OLD_SYSCTL)
    new = config_digests(NEW_SYSCTL)
    if i % 10 == 9:
        return None  # a fresh node: nothing installed yet
    if i % 10 == 8:  # already current
        return {
            "nvidia-driver": PackageRecord(version="560.35.3"),
            "sysctl-tuning": PackageRecord(version="1.2.0", config=new),
            "crash-dump": PackageRecord(version="0.4.0"),
        }
    records = {
        "nvidia-driver": PackageRecord(version="550.90.7"),
        "sysctl-tuning": PackageRecord(version="1.2.0", config=old),
        "crash-dump": PackageRecord(version="0.4.0"),
    }
    if i % 10 == 7:  # driver current; only the sysctl config differs (a config-only change)
        records["nvidia-driver"] = PackageRecord(version="560.35.3")
    if i in (41, 42):  # an earlier attempt at the current target failed on these nodes
        records["nvidia-driver"] = PackageRecord(
            version="550.90.7",
            pending=PendingChange(
                version="560.35.3",
                stages=(Stage.UPGRADE, Stage.CONFIG, Stage.INTERRUPT, Stage.POST_INTERRUPT),
                done=(Stage.UPGRADE,),
                failed="config-check exited 1",
            ),
        )
    return records


def node(i: int) -> dict[str, Any]:
    name = f"gpu-node-{i:03d}"
    annotations: dict[str, str] = {}
    records = _records(i)
    if records is not None:
        key, value = format_annotation(NodePackageState(profile=PROFILE, packages=records))
        annotations[key] = value
    if i in (17, 118):  # another profile is working on these right now
        key, value = format_annotation(
            NodePackageState(
                profile="security-agent",
                packages={"falcon": PackageRecord(version="7.1.0", pending=PendingChange(version="7.2.0"))},
            )
        )
        annotations[key] = value
    ready = "False" if i in (5, 77, 150) else "True"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": PRODUCTS[i % len(PRODUCTS)],
                "topology.kubernetes.io/zone": ZONES[(i // 10) % len(ZONES)],
                "topology.example.com/rack": f"rack-{i // 10:02d}",
            },
            "annotations": annotations,
        },
        "spec": {"unschedulable": True} if i in (23, 164) else {},
        "status": {
            "conditions": [
                {"type": "Ready", "status": ready},
                {"type": "GpuHealthy", "status": "True"},
            ]
        },
    }


def fleet(count: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": [node(i) for i in range(count)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--out", default="tests/fixtures/fleet-200.json")
    args = parser.parse_args()
    Path(args.out).write_text(json.dumps(fleet(args.nodes), indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.nodes} nodes to {args.out}")


if __name__ == "__main__":
    main()
