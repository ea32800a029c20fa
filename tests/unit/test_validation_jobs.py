"""Validation containers of a node gate: the API (names unique, bounds, the gate's non-empty rule
counting them), the Job the renderer makes of one (a stable name per pass and attempt that a
retried activity adopts, pinned, one run, the deadline, the pod's privilege either way, the
labels ``fleetwright logs`` selects on) and the verdict a Job's end gives."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fleetwright.api import keys
from fleetwright.api.common import Toleration
from fleetwright.api.health import NodeGate, ValidationContainer
from fleetwright.api.validation import validate_deploymentpolicy
from fleetwright.stagejob.outcome import StageOutcome, StageReport
from fleetwright.stagejob.validation import (
    HOST_MOUNT,
    VALIDATE_STAGE,
    ValidationJob,
    job_name,
    manifest,
    tail_of,
    verdict,
)

pytestmark = pytest.mark.unit

DIAG: dict[str, Any] = {
    "name": "dcgm-diag",
    "image": "ghcr.io/example/gpu-health:1.0.0",
    "command": ["/usr/local/bin/gpu-health"],
    "args": ["diag", "--level", "2"],
    "env": [{"name": "LEVEL", "value": "2"}],
    "timeoutSeconds": 900,
    "resources": {"cpuRequest": "100m", "memoryLimit": "1Gi"},
}


def job(**changes: Any) -> ValidationJob:
    validation = ValidationContainer.model_validate({**DIAG, **changes.pop("validation", {})})
    base: dict[str, Any] = {
        "profile": "gpu-driver",
        "node": "gpu-node-0001",
        "generation": 3,
        "validation": validation,
        "pass_id": "run-a",
    }
    return ValidationJob(**(base | changes))


def policy(gate: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": {"nodeGate": gate},
    }


def test_duplicate_validation_names_are_refused_naming_the_field() -> None:
    twice = {"validations": [DIAG, {**DIAG, "timeoutSeconds": 60}]}
    found = {i.path: (i.rule, i.message) for i in validate_deploymentpolicy(policy(twice)).errors}
    assert found["spec.nodeGate.validations"] == (
        "node-gate-validation-names-unique",
        "validation names must be unique in the node gate",
    )
    with pytest.raises(ValidationError, match="node-gate-validation-names-unique"):
        NodeGate.model_validate(twice)


def test_a_gate_of_validations_alone_is_a_gate_and_the_bounds_hold() -> None:
    assert NodeGate.model_validate({"validations": [DIAG]}).validations[0].privileged is False
    assert not validate_deploymentpolicy(policy({"validations": [DIAG]})).errors
    for bad in ({"timeoutSeconds": 5}, {"timeoutSeconds": 8 * 86400}, {"name": "Diag_1"}, {"image": "a b"}):
        with pytest.raises(ValidationError):
            ValidationContainer.model_validate({**DIAG, **bad})
    with pytest.raises(ValidationError):
        NodeGate.model_validate({"validations": [{**DIAG, "name": f"v{i}"} for i in range(9)]})


def test_the_job_name_is_stable_per_pass_and_attempt_and_distinct_otherwise() -> None:
    name = job_name(job())
    assert name == job_name(job()) == manifest(job())["metadata"]["name"]  # a retry adopts it
    assert name.startswith("fw-validate-dcgm-diag-")
    assert len(name) <= 63
    others = [
        job(pass_id="run-b"),
        job(attempt=1),
        job(generation=4),
        job(node="gpu-node-0002"),
        job(validation={"name": "nccl"}),
    ]
    assert len({name, *(job_name(o) for o in others)}) == 1 + len(others)
    # What a Job's name does not depend on: its timeout, its image, the activity's retry.
    assert job_name(job(validation={"timeoutSeconds": 60, "image": "x.io/y:2"})) == name
    long = job(validation={"name": "v" * 63})
    assert len(job_name(long)) <= 63


def test_the_job_is_pinned_runs_once_with_its_deadline_and_the_stage_labels() -> None:
    rendered = manifest(job(tolerations=(Toleration(key="gpu", operator="Exists"),)))
    spec = rendered["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 900)
    pod = spec["template"]["spec"]
    assert pod["nodeName"] == "gpu-node-0001"
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    tolerated = {t["key"] for t in pod["tolerations"]}
    assert {
        "node.kubernetes.io/unschedulable",
        keys.RUNTIME_REQUIRED_TAINT,
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "gpu",
    } <= tolerated
    labels = rendered["metadata"]["labels"]
    assert labels[keys.STAGE_LABEL] == VALIDATE_STAGE == "validate"
    assert labels[keys.PACKAGE_LABEL] == "dcgm-diag"
    assert (labels[keys.PROFILE_LABEL], labels[keys.NODE_LABEL]) == ("gpu-driver", "gpu-node-0001")
    assert labels[keys.MANAGED_BY_LABEL] == keys.MANAGED_BY
    assert spec["template"]["metadata"]["labels"] == labels
    (container,) = pod["containers"]
    assert container["name"] == "dcgm-diag"
    assert container["command"] == ["/usr/local/bin/gpu-health"]
    assert container["args"] == ["diag", "--level", "2"]
    assert container["env"] == [{"name": "LEVEL", "value": "2"}]
    assert container["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}


def test_an_unprivileged_validation_gets_nothing_of_the_host() -> None:
    pod = manifest(job())["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["allowPrivilegeEscalation"] is False
    assert "hostPID" not in pod
    assert "hostNetwork" not in pod
    assert "volumes" not in pod
    assert "volumeMounts" not in container


def test_a_privileged_validation_runs_as_root_with_the_host_pids_network_and_root_read_only() -> None:
    pod = manifest(job(validation={"privileged": True}, host_root="/var/lib/test-root"))["spec"]["template"][
        "spec"
    ]
    (container,) = pod["containers"]
    assert container["securityContext"] == {"privileged": True, "runAsUser": 0}
    assert pod["hostPID"] is True
    assert pod["hostNetwork"] is True
    assert pod["volumes"] == [{"name": "host", "hostPath": {"path": "/var/lib/test-root"}}]
    assert container["volumeMounts"] == [
        {"name": "host", "mountPath": HOST_MOUNT, "readOnly": True, "mountPropagation": "HostToContainer"}
    ]


def test_the_verdict_names_the_validation_the_exit_code_or_timeout_and_the_last_lines() -> None:
    lines = "\n".join(f"line {i}" for i in range(10)) + "\n\n"
    tail = tail_of(lines)
    assert tail == ("line 5", "line 6", "line 7", "line 8", "line 9")
    failed = StageReport(job="fw-validate-x", outcome=StageOutcome.FAILED, message="BackoffLimitExceeded")
    report = verdict(job(), failed, 226, tail)
    assert not report.passed
    assert report.exit_code == 226
    assert report.message == (
        "validation dcgm-diag exited 226 (Job fw-validate-x); "
        "last output: line 5 | line 6 | line 7 | line 8 | line 9"
    )
    late = StageReport(
        job="fw-validate-x", outcome=StageOutcome.DEADLINE_EXCEEDED, message="DeadlineExceeded"
    )
    assert (
        verdict(job(), late, None, ()).message
        == "validation dcgm-diag timed out after 900s (Job fw-validate-x)"
    )
    pull = StageReport(job="j", outcome=StageOutcome.IMAGE_PULL_FAILED, message="cannot pull x")
    assert "image pull failed: cannot pull x" in verdict(job(), pull, None, ()).message
    passed = verdict(job(), StageReport(job="j", outcome=StageOutcome.SUCCEEDED), 0, ())
    assert passed.passed
    assert passed.message == "validation dcgm-diag passed (Job j)"
