"""The stage Job manifest: its shape, and its command lines run against a test root filesystem."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleetwright.agent import interrupts
from fleetwright.packagetest.hostroot import build
from fleetwright.packagetest.runner import run_agent
from fleetwright.stagejob.render import StageJobError, StageJobSpec, job_name, render
from tests.support.payloads import step, write_package

pytestmark = pytest.mark.unit


def spec(**overrides: Any) -> StageJobSpec:
    values: dict[str, Any] = {
        "profile": "gpu-tuning",
        "profile_uid": "3f2a",
        "generation": 4,
        "node": "gpu-node-17",
        "package": "tuning",
        "version": "1.2.0",
        "image": "ghcr.io/fleetwright/tuning",
        "stage": "apply",
        "agent_image": "ghcr.io/fleetwright/agent:0.1.0",
        "env": [{"name": "DRIVER", "value": "550"}, {"name": "COPY_RESOLV", "value": "true"}],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
        "timeout_seconds": 1800,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    values.update(overrides)
    return StageJobSpec(**values)


def test_host_root_is_the_mounted_tree_and_must_be_absolute() -> None:
    pod = render(spec(host_root="/srv/scratch-root"))["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "root-mount", "hostPath": {"path": "/srv/scratch-root"}}]
    with pytest.raises(StageJobError, match="host_root: must be an absolute path"):
        render(spec(host_root="scratch-root"))


def test_stage_job_shape() -> None:
    job = render(spec())
    pod = job["spec"]["template"]["spec"]
    assert job["apiVersion"] == "batch/v1"
    assert job["kind"] == "Job"
    assert job["spec"]["backoffLimit"] == 3
    assert job["spec"]["activeDeadlineSeconds"] == 1800
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    assert job["spec"]["podFailurePolicy"]["rules"][0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    assert pod["nodeName"] == "gpu-node-17"
    assert pod["hostPID"] is True
    assert pod["hostNetwork"] is True
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["volumes"] == [{"name": "root-mount", "hostPath": {"path": "/"}}]
    names = [c["name"] for c in pod["initContainers"]]
    assert names == ["tuning-init", "tuning-apply", "tuning-applycheck"]
    copy_dir = "/var/lib/skyhook/gpu-tuning/tuning-1.2.0-3f2a-4"
    copy, work, check = pod["initContainers"]
    assert copy["image"] == "ghcr.io/fleetwright/tuning:1.2.0"
    assert copy["env"] == [{"name": "SKYHOOK_DIR", "value": copy_dir}]
    assert work["args"] == ["apply", "/root", copy_dir]
    assert check["args"] == ["apply-check", "/root", copy_dir]
    for container in pod["initContainers"]:
        assert container["securityContext"]["privileged"] is True
        assert container["volumeMounts"] == [
            {"name": "root-mount", "mountPath": "/root", "mountPropagation": "HostToContainer"}
        ]
    env = {e["name"]: e["value"] for e in work["env"]}  # later duplicates win, as in Kubernetes
    assert env["SKYHOOK_RESOURCE_ID"] == "gpu-tuning-3f2a-4_tuning_1.2.0"
    assert env["SKYHOOK_ROOT_DIR"] == "/var/lib/skyhook/gpu-tuning"
    assert env["SKYHOOK_LOG_DIR"] == "/var/log/skyhook/gpu-tuning"
    assert env["COPY_RESOLV"] == "false"
    assert env["DRIVER"] == "550"
    assert work["resources"] == {"limits": {"cpu": "500m", "memory": "256Mi"}}
    keys = [t["key"] for t in pod["tolerations"]]
    assert keys[:2] == ["node.kubernetes.io/unschedulable", "fleetwright.io/runtime-required"]
    assert "nvidia.com/gpu" in keys
    assert job["metadata"]["labels"] == {
        "fleetwright.io/profile": "gpu-tuning",
        "fleetwright.io/node": "gpu-node-17",
        "fleetwright.io/package": "tuning",
        "fleetwright.io/stage": "apply",
        "app.kubernetes.io/managed-by": "fleetwright",
    }


def test_names_are_deterministic_short_and_distinct() -> None:
    a = job_name(spec())
    assert a == job_name(spec())
    assert len(a) <= 63
    others = {
        job_name(spec(**change))
        for change in (
            {"generation": 5},
            {"node": "n2"},
            {"stage": "config"},
            {"version": "1.2.1"},
            {"profile": "p"},
        )
    }
    assert a not in others
    assert len(others) == 5
    long = spec(package="p" * 60, node="node." + "x" * 240, stage="post-interrupt")
    job = render(long)
    assert len(job["metadata"]["name"]) <= 63
    assert all(len(v) <= 63 for v in job["metadata"]["labels"].values())
    assert all(len(c["name"]) <= 63 for c in job["spec"]["template"]["spec"]["initContainers"])


def test_digest_pins_the_package_image() -> None:
    job = render(spec(digest="sha256:" + "a" * 64))
    assert (
        job["spec"]["template"]["spec"]["initContainers"][0]["image"]
        == "ghcr.io/fleetwright/tuning@sha256:" + "a" * 64
    )


def test_interrupt_job_has_one_agent_container_and_restarts_in_place() -> None:
    data = interrupts.encode(interrupts.InterruptRequest(interrupts.NODE_RESTART))
    job = render(spec(stage="interrupt", interrupt_data=data))
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "OnFailure"
    assert "podFailurePolicy" not in job["spec"]
    assert [c["args"] for c in pod["initContainers"]] == [
        ["interrupt", "/root", "/var/lib/skyhook/gpu-tuning/tuning-1.2.0-3f2a-4", data]
    ]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"stage": "install"}, "stage"),
        ({"stage": "interrupt"}, "interrupt_data"),
        ({"package": "my_pkg"}, "package"),
        ({"node": ""}, "node"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
    ],
)
def test_bad_inputs_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(StageJobError, match=f"{field}:"):
        render(spec(**change))


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    env.update({e["name"]: e["value"] for e in container["env"]})
    return env


def test_rendered_pod_runs_against_a_test_root(tmp_path: Path) -> None:
    """Run the pod's own command lines: the copy in the "package image" with the host at /root,
    then the two agent containers' args with the root mount pointing at the same host."""
    if os.geteuid() != 0:
        pytest.fail("this test runs chroots and must run as root")
    image = build(str(tmp_path / "image"))  # stands in for a FROM busybox package image
    node = build(str(tmp_path / "image" / "root"))  # the host's / as mounted at /root
    write_package(
        image.host("/skyhook-package"),
        {"apply": [step("apply.sh", "env:DRIVER")], "apply-check": [step("apply_check.sh")]},
        {
            "apply.sh": '#!/bin/sh\necho "driver $1 for $SKYHOOK_RESOURCE_ID" > /etc/fleet-demo\n',
            "apply_check.sh": '#!/bin/sh\ngrep -q "driver 550" /etc/fleet-demo\n',
        },
        name="tuning",
        version="1.2.0",
    )
    job = render(spec())
    copy, work, check = job["spec"]["template"]["spec"]["initContainers"]
    copied = subprocess.run(
        copy["command"],
        env=_container_env(copy),
        preexec_fn=lambda: os.chroot(image.path),
        capture_output=True,
        text=True,
        check=False,
    )
    assert copied.returncode == 0, copied.stderr
    copy_dir = copy["env"][0]["value"]
    assert node.exists(f"{copy_dir}/config.json")
    for container in (work, check):
        args = list(container["args"])
        assert args[1] == "/root"
        args[1] = node.path  # the agent's /root is the node's root
        result = run_agent(args, _container_env(container))
        assert result.returncode == 0, result.output
    assert node.read("/etc/fleet-demo") == "driver 550 for gpu-tuning-3f2a-4_tuning_1.2.0\n"
    assert node.exists("/var/lib/skyhook/gpu-tuning/history/tuning.json")
