"""A node gate's validation container on the real node: a real pod run by the real kubelet,
containerd and runc after the node's stages, under fleetwright's cordon.

A validation that exits non-zero fails the node naming the validation and its exit code; the node
stays cordoned (ours) and, its profile being runtime-required, keeps the runtime-required taint;
the rollout halts at the canary; ``fleetwright logs`` prints the container's own output, read
through the apiserver and kubelet.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from fleetwright.api.keys import RUNTIME_REQUIRED_TAINT, NodeReason, cordon_key
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.stagejob.validation import VALIDATE_STAGE
from tests.support.cli import Cli
from tests.support.engine import kubectl_json, unique
from tests.support.realnode import apply_rollout, delete_rollout, group, shellscript
from tests.support.stack import RunningController
from tests.support.waiting import until

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]


@pytest.fixture
def cli(cluster: LocalCluster, temporal_server: LocalTemporal) -> Cli:
    return Cli(cluster, temporal_server)


def _release(cluster: LocalCluster, node: str, name: str) -> None:
    """Hand the real node back to the session's other tests: no cordon, taint or note of ours."""
    cluster.kubectl("uncordon", node, check=False)
    cluster.kubectl("taint", "node", node, f"{RUNTIME_REQUIRED_TAINT}-", check=False)
    cluster.kubectl("annotate", "node", node, f"{cordon_key(name)}-", check=False)


async def test_a_failing_validation_keeps_the_real_node_cordoned_tainted_and_logged(
    cluster: LocalCluster, real_node: RealNode, controller: RunningController, cli: Cli
) -> None:
    name = unique("rnv")
    node = real_node.options.name
    await asyncio.to_thread(group, cluster, real_node, name, 1)
    # A new node held by the runtime-required taint until every such profile is complete on it.
    cluster.kubectl("taint", "node", node, f"{RUNTIME_REQUIRED_TAINT}=true:NoSchedule", "--overwrite")
    diagnostics = f"echo '{name}: GPU 3 failed the memory test'; echo 'dcgmi diag: 1 test failed' >&2; exit 4"
    gate = {
        "validations": [
            {
                "name": "gpu-diag",
                "image": shellscript(real_node).ref,
                "command": ["/bin/sh", "-c", diagnostics],
                "timeoutSeconds": 120,
            }
        ]
    }
    # A configMap makes a fresh install run config after apply.
    stages = ("apply", "apply_check", "config", "config_check")
    scripts = {f"{stage}.sh": "exit 0" for stage in stages}
    try:
        await asyncio.to_thread(
            apply_rollout, cluster, name, scripts, canary=node, node_gate=gate, runtime_required=True
        )

        async def halted() -> dict[str, object] | None:
            view = await cli.json("status", name)
            return view if view["phase"] == "Halted" else None

        view = await until(halted, 300, f"{name} to halt at its canary", interval=1)
        lines = {line["node"]: line for line in view["nodes"]}
        failed = lines[node]
        shown = json.dumps(failed)
        assert failed["state"] == "Failed", shown
        assert failed["reason"] == NodeReason.GATE_FAILED, shown
        assert "validation gpu-diag exited 4" in failed["message"], shown
        # The rollout stopped at the canary: the kwok node never started.
        assert all(line["state"] == "Pending" for n, line in lines.items() if n != node), lines

        held = kubectl_json(cluster, "node", node)
        assert held["spec"].get("unschedulable") is True
        assert cordon_key(name) in held["metadata"]["annotations"]
        taints = {t["key"] for t in held["spec"].get("taints") or []}
        assert RUNTIME_REQUIRED_TAINT in taints

        logs = await cli.ok("logs", name, node, "--stage", VALIDATE_STAGE)
        assert f"{name}: GPU 3 failed the memory test" in logs
        assert "dcgmi diag: 1 test failed" in logs
        # The newest Job of the node is the validation's: plain `fleetwright logs` shows it too.
        assert f"{name}: GPU 3 failed the memory test" in await cli.ok("logs", name, node)
    finally:
        await asyncio.to_thread(delete_rollout, cluster, name)
        await asyncio.to_thread(_release, cluster, node, name)
