"""The stage Job for a stage request: the package, its config and the interrupt mapped onto the
Job, and its name per pass and attempt."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest

from fleetwright.agent import interrupts as agent_interrupts
from fleetwright.api.nodeprofile import Package
from fleetwright.errors import PermanentError
from fleetwright.planner.node.interrupts import (
    NO_INTERRUPT,
    REBOOT,
    Interrupt,
    InterruptKind,
    service_restart,
)
from fleetwright.planner.node.stages import Stage
from fleetwright.stagejob.render import INTERRUPT_BACKOFF_LIMIT, StageJobSpec, config_map_name
from fleetwright.stagejob.render import job_name as stagejob_name
from fleetwright.stagejob.request import StageJob, encode_interrupt, job_spec, manifest

pytestmark = pytest.mark.unit


def job_name(spec: StageJobSpec, attempt: int, pass_id: str = "") -> str:
    return stagejob_name(replace(spec, attempt=attempt, pass_id=pass_id))


def request(**extra: Any) -> StageJob:
    package = Package.model_validate(
        {
            "name": "tuning",
            "version": "1.2.0+build.7",
            "image": "ghcr.io/example/tuning",
            "configMap": {"sysctl.conf": "x", "grub.cfg": "y"},
            "env": [{"name": "MODE", "value": "fast"}],
            "resources": {"cpuRequest": "100m", "memoryLimit": "256Mi"},
            "stageTimeoutSeconds": 900,
        }
    )
    base: dict[str, Any] = {
        "profile": "gpu",
        "node": "node-1",
        "profile_uid": "uid",
        "generation": 2,
        "package": package,
        "stage": Stage.CONFIG,
        "agent_image": "ghcr.io/example/agent:1",
    }
    return StageJob(**{**base, **extra})


@pytest.mark.parametrize(
    ("interrupt", "doc"),
    [
        (REBOOT, {"type": "node_restart"}),
        (
            service_restart("kubelet", "containerd"),
            {"type": "service_restart", "services": ["containerd", "kubelet"]},
        ),
        (Interrupt(kind=InterruptKind.RESTART_ALL_SERVICES), {"type": "restart_all_services"}),
        (Interrupt(kind=InterruptKind.NOOP), {"type": "no_op"}),
    ],
)
def test_interrupts_encode_as_the_agent_decodes_them(interrupt: Interrupt, doc: dict[str, Any]) -> None:
    data = encode_interrupt(interrupt)
    assert json.loads(base64.b64decode(data)) == doc
    decoded = agent_interrupts.decode(data)
    assert decoded.type == doc["type"]
    assert list(decoded.services) == doc.get("services", [])


def test_no_interrupt_cannot_make_an_interrupt_job() -> None:
    with pytest.raises(PermanentError, match="without an interrupt"):
        encode_interrupt(NO_INTERRUPT)
    with pytest.raises(PermanentError, match="needs an interrupt"):
        job_spec(request(stage=Stage.INTERRUPT))


def test_config_map_name_is_lower_cased_and_a_valid_name() -> None:
    assert config_map_name("GPU", "Tuning", "1.2.0+build.7") == "gpu-tuning-1.2.0-build.7"


def test_the_manifest_maps_the_package_and_mounts_each_config_key() -> None:
    rendered = manifest(request(pod_annotations={"a": "b"}, backoff_limit=0, pod_labels={"x": "y"}))
    pod = rendered["spec"]["template"]["spec"]
    copier, work, check = pod["initContainers"]
    assert copier["image"] == "ghcr.io/example/tuning:1.2.0+build.7"
    mounts = [m for m in copier["volumeMounts"] if m["name"] == "package-config"]
    assert mounts == [
        {
            "name": "package-config",
            "mountPath": "/skyhook-package/configmaps/grub.cfg",
            "subPath": "grub.cfg",
        },
        {
            "name": "package-config",
            "mountPath": "/skyhook-package/configmaps/sysctl.conf",
            "subPath": "sysctl.conf",
        },
    ]
    assert {"name": "package-config", "configMap": {"name": "gpu-tuning-1.2.0-build.7"}} in pod["volumes"]
    assert work["args"][0] == "config"
    assert check["args"][0] == "config-check"
    assert work["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}}
    assert work["env"][0] == {"name": "MODE", "value": "fast"}
    assert rendered["spec"]["activeDeadlineSeconds"] == 900
    assert rendered["spec"]["backoffLimit"] == 0
    assert rendered["spec"]["template"]["metadata"]["annotations"] == {"a": "b"}
    assert rendered["spec"]["template"]["metadata"]["labels"]["x"] == "y"


def test_interrupt_jobs_keep_their_unbounded_backoff_and_mount_no_config() -> None:
    rendered = manifest(request(stage=Stage.INTERRUPT, interrupt=REBOOT, backoff_limit=0))
    assert rendered["spec"]["backoffLimit"] == INTERRUPT_BACKOFF_LIMIT
    assert all(v["name"] != "package-config" for v in rendered["spec"]["template"]["spec"]["volumes"])


def test_a_later_attempt_gets_a_new_valid_name_and_attempt_zero_keeps_stagejobs() -> None:
    spec = job_spec(request())
    assert job_name(spec, 0) == stagejob_name(spec)
    assert manifest(request())["metadata"]["name"] == stagejob_name(spec)
    names = {job_name(spec, n) for n in range(4)}
    assert len(names) == 4
    assert all(len(n) <= 63 for n in names)


def test_each_pass_over_a_node_gets_its_own_jobs_and_a_retry_within_a_pass_adopts_its_own() -> None:
    # A node run again at attempt 0 after its records were cleared must not adopt the earlier
    # pass's Complete Jobs (an old interrupt Job meant no reboot, then RebootTimeout).
    spec = job_spec(request())
    first, second = job_name(spec, 0, "run-1"), job_name(spec, 0, "run-2")
    assert first != second
    assert first != job_name(spec, 0)
    assert job_name(spec, 0, "run-1") == first  # an activity retry of the same pass adopts its Job
    assert job_name(spec, 1, "run-1") not in {first, second}
    assert manifest(request(pass_id="run-1"))["metadata"]["name"] == first
    assert all(len(n) <= 63 for n in (first, second))


def test_an_invalid_stage_job_is_a_permanent_error() -> None:
    bad = request(profile="has_underscore")
    with pytest.raises(PermanentError) as failure:
        manifest(bad)
    assert failure.value.reason == "InvalidStageJob"
    assert "profile" in str(failure.value)


def test_the_host_root_setting_reaches_the_jobs_root_mount() -> None:
    pod = manifest(request(host_root="/srv/scratch-root"))["spec"]["template"]["spec"]
    assert pod["volumes"][0] == {"name": "root-mount", "hostPath": {"path": "/srv/scratch-root"}}
