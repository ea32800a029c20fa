"""The validation Job: one validation container of a node gate (``dcgmi diag``, an NCCL test, a
burn-in) run once on one node, as a ``batch/v1`` Job pinned to it.

Owns its pod shape (the container as the user wrote it, privileged with hostPID, hostNetwork and
the host root read-only at ``/host`` only when asked, else no privilege at all; no service-account
token), its one run (``backoffLimit: 0``, ``activeDeadlineSeconds`` = the timeout) and its
deterministic name per (profile, node, validation, generation, pass, attempt), so a retried
activity adopts it. It carries the stage Jobs' labels (stage ``validate``, package = the
validation's name), so ``fleetwright logs`` finds it. Pure: the run-validation activity creates,
adopts and watches the Job.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from fleetwright.api import keys
from fleetwright.api.common import Toleration
from fleetwright.api.health import ValidationContainer
from fleetwright.planner.base import Frozen
from fleetwright.stagejob.outcome import StageOutcome, StageReport
from fleetwright.stagejob.podparts import hashed_name, job_labels, node_tolerations, unprivileged
from fleetwright.stagejob.render import PACKAGE_NAMESPACE
from fleetwright.stagejob.request import pod_resources

VALIDATE_STAGE = "validate"
"""The stage label of validation Jobs (``fleetwright logs PROFILE NODE --stage validate``)."""
HOST_MOUNT = "/host"
TAIL_LINES = 5
"""How many of the container's last output lines a failed validation's message carries."""


class ValidationJob(Frozen):
    """One validation container on one node, as the Job that runs it."""

    profile: str
    node: str
    generation: int
    validation: ValidationContainer
    namespace: str = PACKAGE_NAMESPACE
    host_root: str = Field(default="/", pattern=r"^/")
    """The node path a privileged validation sees at ``/host`` (``EngineSettings.host_root``)."""
    tolerations: tuple[Toleration, ...] = ()
    pod_labels: dict[str, str] = Field(default_factory=dict)
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    attempt: int = Field(default=0, ge=0)
    pass_id: str = ""
    """The node workflow's run: its retried activities adopt its Job, a later pass runs a new one."""


def job_name(job: ValidationJob) -> str:
    """Deterministic per (profile, node, validation, generation, attempt) and pass."""
    name = job.validation.name
    parts = (job.profile, job.node, name, job.generation, job.attempt)
    return hashed_name(f"fw-validate-{name}", parts, job.pass_id)


def _container(job: ValidationJob) -> dict[str, Any]:
    validation = job.validation
    container: dict[str, Any] = {
        "name": validation.name,
        "image": validation.image,
        "env": [e.to_k8s() for e in validation.env],
    }
    if validation.command:
        container["command"] = list(validation.command)
    if validation.args:
        container["args"] = list(validation.args)
    limits = pod_resources(validation.resources)
    if limits is not None:
        container["resources"] = limits
    if validation.privileged:
        container["securityContext"] = {"privileged": True, "runAsUser": 0}
        mount = {"name": "host", "mountPath": HOST_MOUNT, "readOnly": True}
        container["volumeMounts"] = [mount | {"mountPropagation": "HostToContainer"}]
    else:
        container["securityContext"] = unprivileged()
    return container


def _pod_spec(job: ValidationJob) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "nodeName": job.node,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "tolerations": node_tolerations(keys.RUNTIME_REQUIRED_TAINT, [t.to_k8s() for t in job.tolerations]),
        "containers": [_container(job)],
    }
    if job.validation.privileged:
        # GPU tools reach the host's daemons: dcgmi its nv-hostengine on the host's loopback.
        pod["hostPID"] = True
        pod["hostNetwork"] = True
        pod["volumes"] = [{"name": "host", "hostPath": {"path": job.host_root}}]
    return pod


def manifest(job: ValidationJob) -> dict[str, Any]:
    """The Job manifest as a plain dict, ready for ``create_namespaced_job``."""
    labels = job_labels(job.profile, job.node, job.validation.name, VALIDATE_STAGE, job.pod_labels)
    template: dict[str, Any] = {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(job)}
    if job.pod_annotations:
        template["metadata"]["annotations"] = dict(job.pod_annotations)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(job),
            "namespace": job.namespace,
            "labels": labels,
            "annotations": {
                keys.NODE_NAME_ANNOTATION: job.node,
                keys.GENERATION_ANNOTATION: str(job.generation),
            },
        },
        "spec": {
            # One run: a failure is the verdict, never retried into a pass.
            "backoffLimit": 0,
            "activeDeadlineSeconds": job.validation.timeout_seconds,
            "podReplacementPolicy": "Failed",
            "template": template,
        },
    }


class ValidationReport(Frozen):
    """A validation's verdict: the Job's outcome, the container's exit code and its last lines."""

    validation: str
    job: str
    outcome: StageOutcome
    exit_code: int | None = None
    tail: tuple[str, ...] = ()
    message: str

    @property
    def passed(self) -> bool:
        return self.outcome is StageOutcome.SUCCEEDED


def tail_of(log: str, lines: int = TAIL_LINES) -> tuple[str, ...]:
    """The last ``lines`` non-empty lines of a container's output."""
    return tuple(line for line in log.splitlines() if line.strip())[-lines:]


def verdict(
    job: ValidationJob, report: StageReport, exit_code: int | None, tail: tuple[str, ...]
) -> ValidationReport:
    """The validation's report from its Job's: what failed it (exit code, timeout, image pull), in
    a message that names the validation and ends with the container's last lines."""
    name = job.validation.name
    if report.succeeded:
        what = "passed"
    elif report.outcome is StageOutcome.DEADLINE_EXCEEDED:
        what = f"timed out after {job.validation.timeout_seconds}s"
    elif report.outcome is StageOutcome.IMAGE_PULL_FAILED:
        what = f"image pull failed: {report.message}"
    elif exit_code is not None:
        what = f"exited {exit_code}"
    else:
        what = f"failed: {report.message}"
    message = f"validation {name} {what} (Job {report.job})"
    if tail and not report.succeeded:
        message += "; last output: " + " | ".join(tail)
    return ValidationReport(
        validation=name,
        job=report.job,
        outcome=report.outcome,
        exit_code=exit_code,
        tail=tail,
        message=message,
    )
