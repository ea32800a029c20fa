"""What the chart's privileged package namespace admits: the stage pod fleetwright renders, and
only what the stage needs — privilege where the agent changes the host, nothing elsewhere, no
service-account token, no service links, secrets only by reference."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.planner.node.stages import Stage
from fleetwright.stagejob.render import StageJobSpec
from fleetwright.stagejob.render import render as render_job

pytestmark = pytest.mark.unit


def render(stage: str = "apply", **overrides: Any) -> dict[str, Any]:
    spec = StageJobSpec(
        profile="gpu-tuning",
        profile_uid="3f2a",
        generation=1,
        node="gpu-node-1",
        package="tuning",
        version="1.2.0",
        image="ghcr.io/acme/tuning",
        stage=stage,
        agent_image="ghcr.io/fleetwright/agent:0.1.0",
        interrupt_data="eyJ0eXBlIjoicmVib290In0=" if Stage(stage).is_interrupt else None,
        **overrides,
    )
    pod: dict[str, Any] = render_job(spec)["spec"]["template"]["spec"]
    return pod


@pytest.mark.parametrize("stage", sorted(Stage))
def test_no_stage_pod_gets_an_api_token_or_service_links(stage: str) -> None:
    pod = render(stage)
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert "serviceAccountName" not in pod


@pytest.mark.parametrize("stage", sorted(Stage))
def test_the_placeholder_container_has_no_privilege(stage: str) -> None:
    (done,) = render(stage)["containers"]
    context = done["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert "volumeMounts" not in done


def test_only_the_containers_that_change_the_host_are_privileged() -> None:
    pod = render()
    privileged = {
        c["name"] for c in pod["initContainers"] + pod["containers"] if c["securityContext"].get("privileged")
    }
    # copy into the host root, then the agent's chroot of the host (sysctl, modprobe, systemctl)
    assert privileged == {"tuning-init", "tuning-apply", "tuning-applycheck"}
    assert all(c["volumeMounts"][0]["mountPath"] == "/root" for c in pod["initContainers"])


def test_package_secrets_reach_the_pod_by_reference_only() -> None:
    secret = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "pkg-token", "key": "token"}}}
    pod = render(env=[secret])
    for container in pod["initContainers"][1:]:
        assert secret in container["env"]
    assert all("value" not in e for e in pod["initContainers"][1]["env"] if e["name"] == "TOKEN")


def test_a_pinned_package_runs_exactly_its_digest() -> None:
    digest = "sha256:" + "d" * 64
    (copy, *_) = render(digest=digest)["initContainers"]
    assert copy["image"] == f"ghcr.io/acme/tuning@{digest}"
