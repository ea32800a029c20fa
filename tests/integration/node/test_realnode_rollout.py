"""Rollouts over kwok nodes plus the real node: on the real node every stage is a real pod of the
real images (the package image's copy container, the agent's stage and check containers) run by a
real kubelet, containerd and runc, against the node's scratch host root.

- a rollout completes: the script's file is in the scratch root, the service interrupt reached
  the root's recording ``systemctl``, the node carries the profile's state annotation, label and
  condition, the cordon fleetwright put on it is gone, and its stage pods ran the package image
  pinned to its digest in the local registry, which the kubelet pulled from there;
- a failing script: the real Job fails, the rollout halts at the canary, and ``fleetwright logs``
  prints the script's own stderr, read from the container through the apiserver and kubelet;
- a reboot interrupt: the root's ``reboot`` records the call, the node reboots (a new boot id,
  every process of the node restarted) and the node workflow confirms the new boot id.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fleetwright.api.keys import condition_type, cordon_key, status_label_key
from fleetwright.images import spec as image_spec
from fleetwright.local import nodehost
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.planner.node.state import read_profile_state
from tests.support.cli import Cli
from tests.support.engine import kubectl_json, unique
from tests.support.realnode import (
    apply_rollout,
    delete_rollout,
    group,
    marker_of,
    marking_scripts,
    pod_images,
    ran_in_containerd,
    real_stage_pods,
    shellscript,
    wait_complete,
)
from tests.support.stack import RunningController
from tests.support.waiting import until

# The first node test also starts the session's cluster (and builds any image the code changed).
pytestmark = [pytest.mark.node, pytest.mark.timeout(1200)]


@pytest.fixture
def cli(cluster: LocalCluster, temporal_server: LocalTemporal) -> Cli:
    return Cli(cluster, temporal_server)


async def test_a_rollout_runs_its_stages_as_real_containers_on_the_real_node(
    cluster: LocalCluster, real_node: RealNode, host_root: HostRoot, controller: RunningController
) -> None:
    name = unique("rn")
    nodes = await asyncio.to_thread(group, cluster, real_node, name, 2)
    marker = marker_of(name)
    service = f"fleetwright-test-{name}"
    scripts = {
        **marking_scripts(marker, f"applied-by-{name}"),
        "post_interrupt.sh": f"systemctl is-active {service}",
        "post_interrupt_check.sh": "exit 0",
    }
    kernel = nodehost.kernel_parameters()
    await asyncio.to_thread(
        apply_rollout, cluster, name, scripts, interrupt={"type": "service", "services": [service]}
    )
    try:
        await asyncio.to_thread(wait_complete, cluster, name)
        # The package's script ran in the scratch root, through the real agent's chroot.
        assert host_root.read(marker) == f"applied-by-{name}\n"
        assert f"systemctl restart {service}" in host_root.calls()
        node = kubectl_json(cluster, "node", real_node.options.name)
        annotations, labels = node["metadata"]["annotations"], node["metadata"]["labels"]
        record = read_profile_state(annotations, name).packages["shellscript"]
        assert record.version == "1.0.0"
        assert labels[status_label_key(name)] == "Complete"
        (condition,) = [c for c in node["status"]["conditions"] if c["type"] == condition_type(name)]
        assert condition["status"] == "True"
        # The service interrupt disrupts workloads, so fleetwright cordoned the node, and lifted it.
        assert not node["spec"].get("unschedulable")
        assert cordon_key(name) not in annotations
        # Copy, apply and apply-check (and the interrupt, post-interrupt, its check): real
        # containers that exited 0.
        pods = real_stage_pods(cluster, real_node.options.name, name)
        # The package image pinned to its digest in the registry at the generation's start, and
        # the agent's: containerd holds both under the registry's names, which only a pull from it
        # gives (the node imports nothing but the sandbox image).
        pinned = {
            shellscript(real_node).pinned(),
            real_node.image(image_spec.AGENT.ref).pinned(),
        }
        assert pod_images(pods) == pinned
        assert pinned <= real_node.image_refs()
        ran = [c for pod in pods for c in ran_in_containerd(pod)]
        assert ("shellscript-init", 0) in ran
        assert ("shellscript-apply", 0) in ran
        assert ("shellscript-applycheck", 0) in ran
        assert ("shellscript-interrupt", 0) in ran
        assert len(nodes) == 3
        # The kubelet set its kernel parameters, in the scratch files standing in for /proc/sys.
        assert nodehost.kernel_parameters() == kernel
        assert real_node.layout.sysctl_file("vm/overcommit_memory").read_text().strip() == "1"
    finally:
        await asyncio.to_thread(delete_rollout, cluster, name)


async def test_a_failing_script_fails_the_real_job_halts_the_rollout_and_logs_show_its_stderr(
    cluster: LocalCluster, real_node: RealNode, controller: RunningController, cli: Cli
) -> None:
    name = unique("rnf")
    nodes = await asyncio.to_thread(group, cluster, real_node, name, 1)
    scripts = {
        "apply.sh": f"echo '{name}: this stage fails on purpose' >&2; exit 3",
        "apply_check.sh": "exit 0",
    }

    async def ended() -> Any:
        view = await cli.json("status", name)
        return view if view["phase"] in ("Halted", "Complete") else None

    await asyncio.to_thread(apply_rollout, cluster, name, scripts, canary=real_node.options.name)
    try:
        view = await until(ended, 300, f"{name} to halt", interval=1)
        assert view["phase"] == "Halted", view
        states = {n["node"]: n["state"] for n in view["nodes"]}
        assert states[real_node.options.name] == "Failed"
        # The rollout stopped at the canary: the kwok node never got a stage Job.
        kwok = [n for n in nodes if n != real_node.options.name]
        assert all(states[n] == "Pending" for n in kwok), states
        assert not kubectl_json(
            cluster,
            "jobs",
            "-n",
            "fleetwright-system",
            "-l",
            f"fleetwright.io/profile={name},fleetwright.io/node={kwok[0]}",
        )["items"]
        (pod,) = real_stage_pods(cluster, real_node.options.name, name)
        ran = dict(ran_in_containerd(pod))
        assert ran["shellscript-init"] == 0
        assert ran["shellscript-apply"] != 0
        assert "shellscript-applycheck" not in ran
        logs = await cli.ok("logs", name, real_node.options.name, "--stage", "apply")
        assert f"{name}: this stage fails on purpose" in logs
        # The check never ran after the failed step: said so, not an error reading its log.
        assert "container shellscript-applycheck <==\n(never started: PodInitializing)" in logs
    finally:
        await asyncio.to_thread(delete_rollout, cluster, name)


async def test_a_reboot_interrupt_reboots_the_real_node_and_the_new_boot_id_is_confirmed(
    cluster: LocalCluster, real_node: RealNode, host_root: HostRoot, controller: RunningController
) -> None:
    name = unique("rnb")
    await asyncio.to_thread(group, cluster, real_node, name, 0)
    before, boots = real_node.boot_id(), real_node.boots
    scripts = {
        "apply.sh": "exit 0",
        "apply_check.sh": "exit 0",
        "config.sh": "exit 0",
        "config_check.sh": "exit 0",
        "post_interrupt.sh": "exit 0",
        "post_interrupt_check.sh": "exit 0",
    }
    await asyncio.to_thread(apply_rollout, cluster, name, scripts, interrupt={"type": "reboot"})
    try:
        await asyncio.to_thread(wait_complete, cluster, name)
        assert [c for c in host_root.calls() if c.startswith("reboot")] == ["reboot "]
        assert real_node.boots == boots + 1
        after = real_node.boot_id()
        assert after != before
        node = kubectl_json(cluster, "node", real_node.options.name)
        assert node["status"]["nodeInfo"]["bootID"] == after
        assert (
            read_profile_state(node["metadata"]["annotations"], name).packages["shellscript"].version
            == "1.0.0"
        )
    finally:
        await asyncio.to_thread(delete_rollout, cluster, name)
