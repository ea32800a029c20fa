"""Simulated GPU nodes for the local fleet: deterministic names, realistic labels, a boot id.

Pure: builds Node manifests as plain dicts. kwok takes over every node annotated
``kwok.x-k8s.io/node: fake``; its node stages read the boot id from ``BOOT_ID_ANNOTATION``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from fleetwright.api.keys import qualified

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
BOOT_ID_ANNOTATION = "sim.fleetwright.io/boot-id"
# A node carrying this annotation "reboots": kwok's reboot stage gives it a new boot id and
# removes the annotation (see stages.yaml).
REBOOT_ANNOTATION = "sim.fleetwright.io/reboot"
# A stage pod labelled with it fails (``fail``), hangs (``hang``) or never pulls its image
# (``image-pull-backoff``): kwok's stages match on it (see stages.yaml).
OUTCOME_LABEL = "sim.fleetwright.io/outcome"
RACK_LABEL = qualified("rack")
POD_COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
POD_COMPLETE_JITTER = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
POD_READY_DELAY = "pod-ready.stage.kwok.x-k8s.io/delay"
# A stage pod labelled with a stage (``fleetwright.io/stage``) completes after this annotation's
# delay plus the stage's name when it has one (``validate``); every preflight pod reads ``preflight``.
STAGE_COMPLETE_AFTER = "sim.fleetwright.io/complete-after."

GPU_PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-GB200")
ZONES = ("zone-a", "zone-b", "zone-c")
NODES_PER_RACK = 8


def stage_pod_timing(
    complete_seconds: float, ready_seconds: float = 0.0, *, stages: Mapping[str, float] | None = None
) -> dict[str, str]:
    """Pod annotations under which a simulated stage pod is Ready after ``ready_seconds`` and
    completes ``complete_seconds`` after it started, or after ``stages[stage]`` for a pod of that
    stage (``validate``; ``preflight``: every preflight pod). The jitter bound is the delay itself:
    kwok draws a delay between the two, and one at or below the delay REPLACES it (kwok v0.8.0
    ``Stage.Delay``), so a ``jitter-delay`` of ``0s`` would make every stage complete at once."""
    complete = _milliseconds(complete_seconds)
    return {
        POD_COMPLETE_DELAY: complete,
        POD_COMPLETE_JITTER: complete,
        POD_READY_DELAY: _milliseconds(ready_seconds),
        **{STAGE_COMPLETE_AFTER + stage: _milliseconds(seconds) for stage, seconds in (stages or {}).items()},
    }


def _milliseconds(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def node_name(index: int) -> str:
    return f"gpu-node-{index:04d}"


def gpu_product(index: int) -> str:
    """The GPU product of node ``index`` (``nvidia.com/gpu.product``): one per rack."""
    return GPU_PRODUCTS[index // NODES_PER_RACK % len(GPU_PRODUCTS)]


def boot_id(name: str, generation: int = 0) -> str:
    """A stable, unique boot id per node and boot generation (deterministic for repeatable tests)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.boot{generation}.fleetwright.local"))


def node_manifest(index: int, *, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Node ``index`` of the fleet: zone and rack by position, GPU product by rack."""
    name = node_name(index)
    rack = index // NODES_PER_RACK
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        "node.kubernetes.io/instance-type": "gpu-8x",
        "topology.kubernetes.io/region": "local-1",
        "topology.kubernetes.io/zone": ZONES[rack % len(ZONES)],
        RACK_LABEL: f"rack-{rack:03d}",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gpu_product(index),
        "nvidia.com/gpu.count": "8",
    }
    labels.update(extra_labels or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                KWOK_ANNOTATION: "fake",
                BOOT_ID_ANNOTATION: boot_id(name),
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": boot_id(name),
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.machine").hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.system")),
                "operatingSystem": "linux",
                "osImage": "Ubuntu 24.04.3 LTS",
                "kernelVersion": "6.8.0-86-generic",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": "v1.36.3",
                "kubeProxyVersion": "v1.36.3",
            },
        },
    }


def fleet(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [node_manifest(i) for i in range(start, start + count)]
