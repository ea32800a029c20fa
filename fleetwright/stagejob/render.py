"""Renders the ``batch/v1`` Job that runs one package stage (or interrupt) on one node.

It owns the pod shape the agent expects: ``nodeName`` pinned, hostPID/hostNetwork, the host root
(``/``; a scratch tree on a test node) at ``/root`` (HostToContainer), a copy init container in the
package image (with one mount per key of the package's ConfigMap), then ``<stage>`` and
``<stage>-check`` agent init containers; the Job's retry and failure policies; a deterministic name
per pass and attempt; the orchestrator environment (``SKYHOOK_*``); and the pod's least privilege:
the agent and copy containers are privileged root because package steps run host tools in a chroot
of the host (sysctl, modprobe, systemctl, reboot), while the pod gets no service-account token (the
agent never calls the API), no service-link environment and a placeholder container with no
privilege at all. It is pure: it returns a plain dict and never talks to the API server (the
run-stages activity creates the Job).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwright.api import keys
from fleetwright.errors import PermanentError
from fleetwright.planner.node.stages import Stage
from fleetwright.stagejob.podparts import (
    dns_label,
    hashed_name,
    job_labels,
    node_tolerations,
    unprivileged,
)

PACKAGE_NAMESPACE = "fleetwright-system"
"""Where stage Jobs and package ConfigMaps live."""
ROOT_MOUNT = "/root"
STATE_ROOT = "/var/lib/skyhook"
LOG_ROOT = "/var/log/skyhook"
DEFAULT_TIMEOUT_SECONDS = 3600
DEFAULT_BACKOFF_LIMIT = 3
# An interrupt Job restarts in place after the reboot; that restart must never exhaust a budget.
INTERRUPT_BACKOFF_LIMIT = 1_000_000
CONFIG_VOLUME = "package-config"
CONFIG_MOUNT_DIR = "/skyhook-package/configmaps"
PREFLIGHT_ENV = {"FLEETWRIGHT_PREFLIGHT": "true"}
"""Tells the agent its check runs before the work (docs/package-format.md §10)."""


class StageJobError(PermanentError):
    """The inputs cannot make a valid Job; the message names the field."""

    reason = "InvalidStageJob"


@dataclass(frozen=True)
class StageJobSpec:
    """Everything one stage Job needs. ``env`` entries are Kubernetes EnvVar dicts (valueFrom ok)."""

    profile: str
    profile_uid: str
    generation: int
    node: str
    package: str
    version: str
    image: str
    stage: str
    agent_image: str
    host_root: str = "/"
    """The node path mounted at ``/root``: the host's ``/`` everywhere but on a test node."""
    digest: str | None = None
    interrupt_data: str | None = None
    node_order: int = 0
    env: Sequence[Mapping[str, Any]] = ()
    resources: Mapping[str, Any] | None = None
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    grace_period_seconds: int | None = None
    tolerations: Sequence[Mapping[str, Any]] = ()
    runtime_required_taint: str = keys.RUNTIME_REQUIRED_TAINT
    namespace: str = PACKAGE_NAMESPACE
    service_account: str | None = None
    extra_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    backoff_limit: int | None = None
    """Overrides the work stages' backoffLimit (3); interrupts keep theirs."""
    config_keys: Sequence[str] = ()
    """The keys of the package's ConfigMap (``config_map_name``), each mounted into the copy
    container; interrupts mount none."""
    attempt: int = 0
    """Bumped to run a stage again after a failed Job (operator retry): a new Job name."""
    pass_id: str = ""
    """One pass over the node (the engine uses its node workflow run): part of the Job name."""
    preflight: bool = False
    """Only the check mode, before the work, on the node in service: copy and check containers
    (the check with ``FLEETWRIGHT_PREFLIGHT=true``), its own Job name, no retry."""

    @property
    def is_interrupt(self) -> bool:
        return Stage(self.stage).is_interrupt

    @property
    def copy_dir(self) -> str:
        """``/var/lib/skyhook/<profile>/<pkg>-<version>-<uid>-<generation>``: a fresh one per generation."""
        return (
            f"{STATE_ROOT}/{self.profile}/{self.package}-{self.version}-{self.profile_uid}-{self.generation}"
        )

    @property
    def resource_id(self) -> str:
        return f"{self.profile}-{self.profile_uid}-{self.generation}_{self.package}_{self.version}"

    @property
    def package_image(self) -> str:
        return f"{self.image}@{self.digest}" if self.digest else f"{self.image}:{self.version}"


def job_name(spec: StageJobSpec) -> str:
    """Deterministic: the same (profile, node, package, version, stage, generation), pass and
    attempt give one name, so a retried activity adopts the Job its earlier attempt created. The
    pass (the engine uses its node workflow run) gives a node run again from scratch fresh Jobs
    instead of an earlier pass's finished ones; a later attempt hashes a distinct stage tag."""
    stage = f"{spec.stage}-preflight" if spec.preflight else spec.stage
    stage = f"{stage}-r{spec.attempt}" if spec.attempt else stage
    parts = (spec.profile, spec.node, spec.package, spec.version, stage, spec.generation)
    return hashed_name(f"fw-{spec.package}-{stage}", parts, spec.pass_id)


def config_map_name(profile: str, package: str, version: str) -> str:
    """``<cr>-<pkg>-<version>``, lower-cased; characters a name cannot hold (semver build
    metadata's ``+``) become ``-``."""
    return re.sub(r"[^a-z0-9.-]", "-", f"{profile}-{package}-{version}".lower())[:253].strip("-.")


def validate(spec: StageJobSpec) -> None:
    problems = []
    if spec.stage not in set(Stage):
        problems.append(f"stage: must be one of {', '.join(sorted(Stage))}, got {spec.stage!r}")
    elif spec.preflight and spec.is_interrupt:
        problems.append("preflight: an interrupt stage has no check to run")
    elif spec.is_interrupt != bool(spec.interrupt_data):
        problems.append("interrupt_data: required for interrupt stages and only for them")
    for name in ("profile", "profile_uid", "node", "package", "version", "image", "agent_image"):
        if not getattr(spec, name):
            problems.append(f"{name}: must not be empty")
    for name in ("profile", "package"):
        if "_" in getattr(spec, name) or "/" in getattr(spec, name):
            problems.append(f"{name}: must not contain '_' or '/' (SKYHOOK_RESOURCE_ID splits on '_')")
    if "_" in spec.version:
        problems.append("version: must not contain '_' (SKYHOOK_RESOURCE_ID splits on '_')")
    if not spec.host_root.startswith("/"):
        problems.append(f"host_root: must be an absolute path, got {spec.host_root!r}")
    if spec.timeout_seconds <= 0:
        problems.append("timeout_seconds: must be positive")
    if problems:
        raise StageJobError("; ".join(problems))


def agent_env(spec: StageJobSpec) -> list[dict[str, Any]]:
    """The package's own env first, then the orchestrator's: later duplicates win in Kubernetes."""
    orchestrator = {
        "SKYHOOK_RESOURCE_ID": spec.resource_id,
        "SKYHOOK_ROOT_DIR": f"{STATE_ROOT}/{spec.profile}",
        "SKYHOOK_LOG_DIR": f"{LOG_ROOT}/{spec.profile}",
        "SKYHOOK_NODE_ORDER": str(spec.node_order),
        "COPY_RESOLV": "false",  # never overwrite the host's resolver
    }
    return [dict(e) for e in spec.env] + [{"name": k, "value": v} for k, v in orchestrator.items()]


def _mounts() -> list[dict[str, Any]]:
    return [{"name": "root-mount", "mountPath": ROOT_MOUNT, "mountPropagation": "HostToContainer"}]


def _agent_container(
    spec: StageJobSpec, name: str, args: list[str], extra_env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    env = agent_env(spec) + [{"name": k, "value": v} for k, v in (extra_env or {}).items()]
    container: dict[str, Any] = {
        "name": dns_label(name),
        "image": spec.agent_image,
        "args": args,
        "env": env,
        "securityContext": {"privileged": True, "runAsUser": 0},
        "volumeMounts": _mounts(),
    }
    if spec.resources:
        container["resources"] = dict(spec.resources)
    return container


def copy_container(spec: StageJobSpec) -> dict[str, Any]:
    # The package image's own /bin/sh, mkdir and cp; a shell glob, so top-level dot-files stay.
    script = 'mkdir -p "/root${SKYHOOK_DIR}" && cp -r /skyhook-package/* "/root${SKYHOOK_DIR}"'
    # One subPath mount per config key, so the package's own files in ``configmaps/`` stay
    # visible (NodeWright #208); the copy puts them at ``${SKYHOOK_DIR}/configmaps``.
    config = [
        {"name": CONFIG_VOLUME, "mountPath": f"{CONFIG_MOUNT_DIR}/{key}", "subPath": key}
        for key in (sorted(spec.config_keys) if mounted_config_map(spec) else ())
    ]
    return {
        "name": dns_label(f"{spec.package}-init"),
        "image": spec.package_image,
        "command": ["/bin/sh", "-c", script],
        "env": [{"name": "SKYHOOK_DIR", "value": spec.copy_dir}],
        "securityContext": {"privileged": True, "runAsUser": 0},
        "volumeMounts": _mounts() + config,
    }


def init_containers(spec: StageJobSpec) -> list[dict[str, Any]]:
    if spec.is_interrupt:
        args = ["interrupt", ROOT_MOUNT, spec.copy_dir, spec.interrupt_data or ""]
        return [_agent_container(spec, f"{spec.package}-interrupt", args)]
    # NodeWright's container name has no hyphen before "check"; the mode name has one.
    check_args = [f"{spec.stage}-check", ROOT_MOUNT, spec.copy_dir]
    if spec.preflight:
        check = _agent_container(spec, f"{spec.package}-{spec.stage}check", check_args, PREFLIGHT_ENV)
        return [copy_container(spec), check]
    return [
        copy_container(spec),
        _agent_container(spec, f"{spec.package}-{spec.stage}", [spec.stage, ROOT_MOUNT, spec.copy_dir]),
        _agent_container(spec, f"{spec.package}-{spec.stage}check", check_args),
    ]


def tolerations(spec: StageJobSpec) -> list[dict[str, Any]]:
    return node_tolerations(spec.runtime_required_taint, spec.tolerations)


def labels(spec: StageJobSpec) -> dict[str, str]:
    return job_labels(spec.profile, spec.node, spec.package, spec.stage, spec.extra_labels)


def mounted_config_map(spec: StageJobSpec) -> str | None:
    """The ConfigMap the Job mounts (the package's config; it must exist first), else None."""
    if not spec.config_keys or spec.is_interrupt:
        return None
    return config_map_name(spec.profile, spec.package, spec.version)


def _volumes(spec: StageJobSpec) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [{"name": "root-mount", "hostPath": {"path": spec.host_root}}]
    config = mounted_config_map(spec)
    if config is not None:
        volumes.append({"name": CONFIG_VOLUME, "configMap": {"name": config}})
    return volumes


def _pod_spec(spec: StageJobSpec) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "nodeName": spec.node,
        "hostPID": True,
        "hostNetwork": True,
        "restartPolicy": "OnFailure" if spec.is_interrupt else "Never",
        # The agent reads everything from the copy directory; a token would only be loot.
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "tolerations": tolerations(spec),
        "initContainers": init_containers(spec),
        # The work happens in init containers; the main container only marks the pod finished.
        "containers": [
            {
                "name": "done",
                "image": spec.agent_image,
                "command": ["/bin/sh", "-c", "exit 0"],
                "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}},
                "securityContext": unprivileged(),
            }
        ],
        "volumes": _volumes(spec),
    }
    if spec.grace_period_seconds is not None:
        pod["terminationGracePeriodSeconds"] = spec.grace_period_seconds
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    return pod


def _backoff_limit(spec: StageJobSpec) -> int:
    if spec.preflight:
        return 0  # a failed check sends the node down the normal path at once
    if spec.is_interrupt:
        return INTERRUPT_BACKOFF_LIMIT
    return DEFAULT_BACKOFF_LIMIT if spec.backoff_limit is None else spec.backoff_limit


def _template_metadata(spec: StageJobSpec, job_labels: Mapping[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": dict(job_labels)}
    if spec.pod_annotations:
        metadata["annotations"] = dict(spec.pod_annotations)
    return metadata


def render(spec: StageJobSpec) -> dict[str, Any]:
    """The Job manifest for ``spec`` as a plain dict, ready for ``create_namespaced_job``."""
    validate(spec)
    job_labels = labels(spec)
    job_spec: dict[str, Any] = {
        "backoffLimit": _backoff_limit(spec),
        "activeDeadlineSeconds": spec.timeout_seconds,
        "template": {"metadata": _template_metadata(spec, job_labels), "spec": _pod_spec(spec)},
    }
    # Two executors must never share the host paths: no replacement pod until the old one failed.
    job_spec["podReplacementPolicy"] = "Failed"
    if not spec.is_interrupt:
        # An eviction is not a package failure. (Needs restartPolicy Never, so not for interrupts.)
        job_spec["podFailurePolicy"] = {
            "rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
            ]
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(spec),
            "namespace": spec.namespace,
            "labels": job_labels,
            "annotations": {
                keys.NODE_NAME_ANNOTATION: spec.node,
                keys.PACKAGE_VERSION_ANNOTATION: spec.version,
                keys.GENERATION_ANNOTATION: str(spec.generation),
                keys.COPY_DIR_ANNOTATION: spec.copy_dir,
            },
        },
        "spec": job_spec,
    }
