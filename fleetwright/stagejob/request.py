"""The part of a stage request that shapes the stage Job (``StageJob``), and its mapping onto the
renderer's spec: the package's image, env and resources, the interrupt in the agent's encoding,
the pass and the attempt. The run-stages activity's request extends ``StageJob`` with what the
activity does around the Job (statuses, the record, the reboot wait). Pure.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pydantic import Field

from fleetwright.api.common import Toleration
from fleetwright.api.compat import added_fields
from fleetwright.api.nodeprofile import Package
from fleetwright.api.packageparts import PackageResources
from fleetwright.planner.base import Frozen
from fleetwright.planner.node.interrupts import Interrupt, InterruptKind
from fleetwright.planner.node.stages import Stage
from fleetwright.stagejob.render import PACKAGE_NAMESPACE, StageJobError, StageJobSpec, render

# The agent's spelling of each interrupt; NONE never reaches a Job.
AGENT_INTERRUPT_TYPES = {
    InterruptKind.REBOOT: "node_restart",
    InterruptKind.RESTART_ALL_SERVICES: "restart_all_services",
    InterruptKind.SERVICE: "service_restart",
    InterruptKind.NOOP: "no_op",
}


class StageJob(Frozen):
    """One package stage on one node, as the Job that runs it."""

    profile: str
    node: str
    profile_uid: str
    generation: int
    package: Package
    stage: Stage
    interrupt: Interrupt | None = None
    """For interrupt stages: the merged interrupt to run (encoded for the agent)."""
    agent_image: str
    host_root: str = Field(default="/", pattern=r"^/")
    """The node path mounted as the host root (``EngineSettings.host_root``)."""
    namespace: str = PACKAGE_NAMESPACE
    node_order: int = 0
    tolerations: tuple[Toleration, ...] = ()
    pod_labels: dict[str, str] = Field(default_factory=dict)
    """Extra pod labels (tests use ``sim.fleetwright.io/outcome`` to make kwok fail or hang a pod)."""
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    """Extra pod annotations (tests set kwok's ``pod-complete.stage.kwok.x-k8s.io/delay``)."""
    backoff_limit: int | None = Field(default=None, ge=0)
    """Override the Job's backoffLimit (default 3) for work stages; interrupts keep theirs."""
    attempt: int = Field(default=0, ge=0)
    """Bump to run a stage again after a failed Job (operator retry): a new Job name, while a
    retried activity with the same attempt adopts the existing Job."""
    pass_id: str = ""
    """One pass over the node (the node workflow's run id): part of the Job name, so a node run
    again at attempt 0 after its records were cleared (``node reset``, drift re-applying the same
    target) gets fresh Jobs instead of adopting the old pass's Complete ones (an old interrupt Job
    meant no reboot, then RebootTimeout). Empty: a call outside any pass (no earlier pass to
    wait for)."""
    preflight: bool = False
    """Run only the stage's check mode, before its work, on the node in service
    (``planner.node.preflight``): a Job of its own name that is never retried."""
    _since_0_1_0 = added_fields("preflight")


def encode_interrupt(interrupt: Interrupt) -> str:
    """Base64 JSON for the agent; ``services`` only for service restarts (an extra key crashes the
    v6 agent)."""
    if interrupt.kind is InterruptKind.NONE:
        raise StageJobError("interrupt stage without an interrupt")
    doc: dict[str, Any] = {"type": AGENT_INTERRUPT_TYPES[interrupt.kind]}
    if interrupt.kind is InterruptKind.SERVICE:
        doc["services"] = list(interrupt.services)
    return base64.b64encode(json.dumps(doc).encode()).decode()


def pod_resources(resources: PackageResources | None) -> dict[str, Any] | None:
    """A container's requests and limits (Kubernetes quantities), None when it sets none."""
    if resources is None:
        return None
    requests = {"cpu": resources.cpu_request, "memory": resources.memory_request}
    limits = {"cpu": resources.cpu_limit, "memory": resources.memory_limit}
    out = {
        "requests": {k: v for k, v in requests.items() if v},
        "limits": {k: v for k, v in limits.items() if v},
    }
    return {k: v for k, v in out.items() if v} or None


def job_spec(job: StageJob) -> StageJobSpec:
    package: Package = job.package
    interrupt = job.interrupt if job.stage.is_interrupt else None
    if job.stage.is_interrupt and interrupt is None:
        raise StageJobError(f"stage {job.stage.value} needs an interrupt")
    return StageJobSpec(
        profile=job.profile,
        profile_uid=job.profile_uid,
        generation=job.generation,
        node=job.node,
        package=package.name,
        version=package.version,
        image=package.image,
        digest=package.digest,
        stage=job.stage.value,
        agent_image=job.agent_image,
        host_root=job.host_root,
        interrupt_data=encode_interrupt(interrupt) if interrupt is not None else None,
        node_order=job.node_order,
        env=[e.to_k8s() for e in package.env],
        resources=pod_resources(package.resources),
        timeout_seconds=package.stage_timeout_seconds,
        tolerations=[t.to_k8s() for t in job.tolerations],
        namespace=job.namespace,
        extra_labels=dict(job.pod_labels),
        pod_annotations=dict(job.pod_annotations),
        backoff_limit=job.backoff_limit,
        config_keys=tuple(package.config_map),
        attempt=job.attempt,
        pass_id=job.pass_id,
        preflight=job.preflight,
    )


def manifest(job: StageJob) -> dict[str, Any]:
    """The Job to create for ``job``."""
    return render(job_spec(job))
