"""``helm install`` to Ready with the chart's own Temporal, on the real node: how long the README's
install takes before fleetwright can run a rollout, and where that time goes.

It starts the local control plane with one real node (kubelet, containerd, runc; needs root; the
images this checkout builds, pushed to the local OCI registry), binds the embedded Temporal's claim
to a static hostPath volume (no provisioner here), then runs the install the node tier runs
(``tests/support/chartinstall.py``: the README's, plus the local node's nodeSelector and scratch
host root) and times it: from ``helm install`` to its return (``--wait``: every Deployment Ready),
each pod from creation to Ready (Kubernetes' whole seconds), and ``helm test``. The pulls of the
fleetwright and temporal images (about 159 MB compressed; their base layer once) from the registry
on loopback are in it; over a network, add their transfer. Run as root:

    .venv/bin/python bench/chart_install.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a file (python bench/chart_install.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import calibrate, loadavg
from fleetwright.images import spec as image_spec
from fleetwright.local import realnode
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.realnode import RealNodeOptions
from tests.support.chartinstall import (
    built,
    chart_values,
    embedded_temporal_values,
    install_args,
    local_volume,
)
from tests.support.chartrbac import CHART, helm

RELEASE, NAMESPACE, SIZE = "fleetwright", "fleetwright", "1Gi"


def _time(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _pods(cluster: LocalCluster) -> list[dict[str, Any]]:
    listed = json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json").stdout)
    return list(listed["items"])


def _ready_seconds(pod: dict[str, Any]) -> float | None:
    conditions = pod["status"].get("conditions") or []
    ready = [c for c in conditions if c["type"] == "Ready" and c["status"] == "True"]
    if not ready:
        return None
    return _time(ready[0]["lastTransitionTime"]) - _time(pod["metadata"]["creationTimestamp"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/chart_install.py", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    cluster = LocalCluster(ClusterOptions(real_node=RealNodeOptions()))
    cluster.start()
    try:
        node = cluster.real_node
        assert node is not None
        home = Path(tempfile.mkdtemp(prefix="bench-helm-"))
        local_volume(cluster, node, f"{RELEASE}-temporal", SIZE)
        values = [
            *chart_values(
                built(node, image_spec.FLEETWRIGHT).digest, "fleetwright", realnode.chart_settings(node, None)
            ),
            *embedded_temporal_values(node, SIZE),
        ]
        load = f"load average {loadavg()}, calibration {calibrate():.0f} ms"
        started = time.monotonic()
        helm(cluster, home, *install_args(RELEASE, CHART, NAMESPACE, values))
        installed = time.monotonic() - started
        pods = _pods(cluster)
        started = time.monotonic()
        helm(cluster, home, "test", RELEASE, "-n", NAMESPACE)
        tested = time.monotonic() - started
    finally:
        cluster.stop()
    print(f"machine: {load}")
    print(f"helm install --wait, to every Deployment Ready: {installed:.1f} s")
    print(f"helm test (webhook, Temporal): {tested:.1f} s")
    print("pod: created -> Ready (whole seconds)")
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        seconds = _ready_seconds(pod)
        shown = "not Ready" if seconds is None else f"{seconds:.0f} s"
        print(f"  {pod['metadata']['labels'].get('app.kubernetes.io/component', '?'):<11} {shown}")
    print("reproduce: .venv/bin/python bench/chart_install.py   # root")
    return 0


if __name__ == "__main__":
    sys.exit(main())
