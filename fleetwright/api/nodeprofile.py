"""The NodeProfile resource (short name ``np``): which packages a set of nodes must carry, how to
get them there safely (drain, protected pods, runtime-required taint) and which DeploymentPolicy
paces the rollout.

Owns the NodeProfile schema and its single-object rules (mirrored as CEL in the CRD); a package's
dependencies, stage pod settings and uninstall settings are in ``fleetwright.api.packageparts``.
Rules that need more than one field of context across the package list (dependsOn, cycles,
configInterrupts globs, referenced policy) live in ``fleetwright.api.profilechecks``. Must not do
I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from fleetwright.api.common import (
    DNS_LABEL_PATTERN,
    MAX_LIST,
    MAX_NAME,
    MAX_SHORT_STRING,
    ApiModel,
    LabelSelector,
    LocalRule,
    ObjectMeta,
    Toleration,
    selector_nonempty_cel,
)
from fleetwright.api.conditions import Condition, Phase
from fleetwright.api.interrupttypes import InterruptType
from fleetwright.api.keys import RUNTIME_REQUIRED_TAINT
from fleetwright.api.packageparts import (
    CONFIG_KEY_PATTERN,
    EnvVar,
    PackageDependency,
    PackageResources,
    Uninstall,
)

KIND = "NodeProfile"
PLURAL = "nodeprofiles"

SERVICE_NAME_PATTERN = r"^[-A-Za-z0-9:_.@]+$"
# Glob characters allowed in configInterrupts keys on top of the configMap key characters.
CONFIG_GLOB_PATTERN = r"^[-._a-zA-Z0-9*?\[\]!]+$"
MAX_CONFIG_VALUE = 262144


class Interrupt(ApiModel):
    """What the node needs after a package's work so the change takes effect."""

    type: InterruptType = Field(
        description="reboot (drain, reboot, verify the boot id changed), service (restart the listed systemd "
        "units), restartAllServices (reload all services; also accepted as restart_all_services, the agent "
        "spelling) or noop (no disruption: runs the post-interrupt stage only, without a drain).",
    )
    services: list[Annotated[str, Field(max_length=256, pattern=SERVICE_NAME_PATTERN)]] = Field(
        default_factory=list,
        description="Systemd units to restart. Required for type service, forbidden otherwise.",
        max_length=MAX_LIST,
    )

    local_rules = (
        LocalRule(
            name="interrupt-service-needs-services",
            cel="self.type != 'service' || (has(self.services) && size(self.services) > 0)",
            message="services must list at least one unit when type is service",
            field_path=".services",
            reason="FieldValueRequired",
            check=lambda m: m.type != "service" or len(m.services) > 0,
        ),
        LocalRule(
            name="interrupt-services-only-for-service",
            cel="self.type == 'service' || !has(self.services) || size(self.services) == 0",
            message="services is only allowed when type is service",
            field_path=".services",
            reason="FieldValueForbidden",
            check=lambda m: m.type == "service" or len(m.services) == 0,
        ),
    )


class ConfigInterrupt(ApiModel):
    """The interrupt a change of some configMap keys calls for (NodeWright's configInterrupts)."""

    key: str = Field(
        description="A configMap key, or a glob over keys (`*`, `?`, `[...]`), e.g. `sysctl.conf` or "
        "`service_*.conf`. "
        "It must match at least one key of the package's configMap.",
        min_length=1,
        max_length=MAX_NAME,
        pattern=CONFIG_GLOB_PATTERN,
    )
    interrupt: Interrupt = Field(description="The interrupt to run when a matching key changes.")


class Package(ApiModel):
    """One package (a container image with a NodeWright-compatible manifest and scripts) the nodes must
    carry."""

    name: str = Field(
        description="Package key, unique within the profile (DNS label). Scripts see it in "
        "SKYHOOK_RESOURCE_ID.",
        min_length=1,
        max_length=MAX_SHORT_STRING,
        pattern=DNS_LABEL_PATTERN,
    )
    version: str = Field(
        description="Semantic version (semver 2.0). The image is pulled as `<image>:<version>`. Raising it "
        "upgrades, lowering it downgrades (no implicit uninstall).",
        min_length=1,
        max_length=128,
    )
    image: str = Field(
        description="Fully-qualified image repository without tag or digest, e.g. "
        "`ghcr.io/nvidia/skyhook-packages/tuning` (short names are rejected: some runtimes refuse them).",
        min_length=1,
        max_length=512,
    )
    digest: str | None = Field(
        default=None,
        description="Optional content digest `sha256:<64 hex>`; when set the image is pulled by digest.",
        pattern=r"^sha256:[0-9a-f]{64}$",
        max_length=71,
    )
    depends_on: list[PackageDependency] = Field(
        default_factory=list,
        description="Packages of this profile (name and exact version) that must be complete on a node "
        "before "
        "this one starts there. Cycles are rejected.",
        max_length=MAX_LIST,
    )
    interrupt: Interrupt | None = Field(
        default=None,
        description="The interrupt after install/upgrade. Interrupts of several packages on one node merge "
        "into "
        "one (reboot > restartAllServices > service > noop). Absent: no interrupt and no drain.",
    )
    config_map: dict[
        Annotated[str, Field(max_length=MAX_NAME, pattern=CONFIG_KEY_PATTERN)],
        Annotated[str, Field(max_length=MAX_CONFIG_VALUE)],
    ] = Field(
        default_factory=dict,
        description="Configuration files handed to the package (key = file name, value = content), as in a "
        "ConfigMap's data. A change to these alone runs only the config stage.",
        max_length=MAX_LIST,
    )
    config_interrupts: list[ConfigInterrupt] = Field(
        default_factory=list,
        description="Interrupts for config-only changes: when changed keys match `key`, the listed interrupt "
        "runs instead of the package interrupt. Keys not listed here cause no interrupt.",
        max_length=MAX_LIST,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]},
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        description="Environment variables for the package's stage pods.",
        max_length=MAX_LIST,
    )
    resources: PackageResources | None = Field(
        default=None,
        description="CPU and memory for the package's stage pods; absent uses fleetwright's defaults.",
    )
    stage_timeout_seconds: int = Field(
        default=3600,
        description="Upper bound for one stage (work plus check) on one node; the node fails after it.",
        ge=30,
        le=86400,
    )
    uninstall: Uninstall = Field(
        default_factory=Uninstall,
        json_schema_extra={"default": {}},
        description="Explicit uninstall settings.",
    )

    local_rules = (
        LocalRule(
            name="package-no-self-dependency",
            cel="!has(self.dependsOn) || !self.dependsOn.exists(d, d.name == self.name)",
            message="a package cannot depend on itself",
            field_path=".dependsOn",
            check=lambda m: all(d.name != m.name for d in m.depends_on),
        ),
    )

    def image_reference(self) -> str:
        """What the node pulls: by digest when pinned, else by the version tag."""
        return f"{self.image}@{self.digest}" if self.digest else f"{self.image}:{self.version}"


class DrainSpec(ApiModel):
    """How nodes are drained before a disruptive interrupt (the Eviction API, PDBs honoured)."""

    timeout_seconds: int = Field(
        default=3600,
        description="How long a drain may take (PDB refusals are waited on, visibly) before onTimeout "
        "applies.",
        ge=1,
        le=7 * 86400,
    )
    grace_period_seconds: int | None = Field(
        default=None,
        description="Termination grace period given to evicted pods; absent uses each pod's own.",
        ge=0,
        le=86400,
    )
    delete_empty_dir_data: bool = Field(
        default=True,
        description="Evict pods that use emptyDir volumes (their data is lost), as NodeWright does by "
        "default.",
    )
    force: bool = Field(
        default=False,
        description="Delete pods not managed by a controller (they are not recreated). Off: such pods block "
        "the drain with reason UnmanagedPod.",
    )
    disable_eviction: bool = Field(
        default=False,
        description="Delete pods instead of evicting them, bypassing PodDisruptionBudgets. An audited "
        "escalation.",
    )
    on_timeout: Literal["wait", "fail-node"] = Field(
        default="fail-node",
        description="After timeoutSeconds: fail-node marks the node failed (still cordoned; counts toward "
        "the "
        "policy's failure rules); wait keeps waiting with a DrainTimeout condition and event.",
    )


class PolicyReference(ApiModel):
    """A reference to a cluster-scoped DeploymentPolicy."""

    name: str = Field(description="Name of the DeploymentPolicy.", min_length=1, max_length=MAX_NAME)


class NodeProfileSpec(ApiModel):
    """What a set of nodes must carry and how to change it safely."""

    node_selector: LabelSelector | None = Field(
        default=None,
        description="Nodes this profile targets. Must have at least one requirement: an empty selector does "
        "NOT "
        "mean all nodes; set allNodes: true for that.",
    )
    all_nodes: bool = Field(
        default=False,
        description="Explicitly target every node in the cluster (instead of nodeSelector).",
    )
    packages: list[Package] = Field(
        description="The packages, each with a unique name.",
        min_length=1,
        max_length=MAX_LIST,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    pod_non_interrupt_labels: LabelSelector | None = Field(
        default=None,
        description="Pods that must not be interrupted: while a Running or Pending pod on a node matches, "
        "the node "
        "is cordoned but not drained or interrupted (reported as Blocked/NonInterruptPodsRunning). An empty "
        "selector matches no pods.",
    )
    drain: DrainSpec = Field(
        default_factory=DrainSpec,
        json_schema_extra={"default": {}},
        description="Drain settings for disruptive interrupts.",
    )
    runtime_required: bool = Field(
        default=False,
        description=f"Nodes carry the taint {RUNTIME_REQUIRED_TAINT}:NoSchedule until this profile is "
        "complete on them (package pods tolerate it).",
    )
    auto_taint_new_nodes: bool = Field(
        default=False,
        description="Taint newly joined targeted nodes with the runtime-required taint (requires "
        "runtimeRequired).",
    )
    priority: int = Field(
        default=200,
        description="Order among profiles sharing a node: lower runs first, ties by name. Buckets: 1-99 "
        "infrastructure/security, 100-199 configuration, 200+ tuning.",
        ge=1,
        le=10000,
    )
    sequencing: Literal["node", "all"] = Field(
        default="node",
        description="node: a node starts this profile once every earlier profile targeting it is complete "
        "there; all: once every earlier profile targeting it is complete on all its nodes. A wait that only "
        "a human can end (an earlier profile failed or blocked on a node, or stopped with nodes left) is "
        "shown as EarlierProfileFailed, EarlierProfileBlocked or EarlierProfileStopped.",
    )
    deployment_policy_ref: PolicyReference | None = Field(
        default=None,
        description="The DeploymentPolicy pacing this profile's rollouts. Absent: the built-in conservative "
        "policy "
        "(one node at a time, halt on the first failure).",
    )
    additional_tolerations: list[Toleration] = Field(
        default_factory=list,
        description="Extra tolerations for package pods (e.g. for tainted GPU nodes). Wildcards are "
        "rejected.",
        max_length=32,
    )

    local_rules = (
        LocalRule(
            name="nodeselector-required",
            cel="(has(self.allNodes) && self.allNodes) || (has(self.nodeSelector) && ("
            + selector_nonempty_cel("self.nodeSelector")
            + "))",
            message="nodeSelector must have at least one matchLabels entry or matchExpressions requirement "
            "(set allNodes: true to target every node explicitly)",
            field_path=".nodeSelector",
            reason="FieldValueRequired",
            check=lambda m: m.all_nodes or (m.node_selector is not None and not m.node_selector.is_empty()),
        ),
        LocalRule(
            name="allnodes-excludes-nodeselector",
            cel="!has(self.allNodes) || !self.allNodes || !has(self.nodeSelector)",
            message="allNodes: true and nodeSelector are mutually exclusive",
            field_path=".allNodes",
            reason="FieldValueForbidden",
            check=lambda m: not m.all_nodes or m.node_selector is None,
        ),
        LocalRule(
            name="autotaint-needs-runtimerequired",
            cel="!has(self.autoTaintNewNodes) || !self.autoTaintNewNodes || (has(self.runtimeRequired) && "
            "self.runtimeRequired)",
            message="autoTaintNewNodes requires runtimeRequired: true",
            field_path=".autoTaintNewNodes",
            check=lambda m: not m.auto_taint_new_nodes or m.runtime_required,
        ),
    )

    def package(self, name: str) -> Package | None:
        """The package called ``name``, if any."""
        return next((p for p in self.packages if p.name == name), None)


class NodeIssue(ApiModel):
    """A node that needs attention (bounded list; full per-node state lives on the Node)."""

    node: str = Field(description="Node name.", max_length=MAX_NAME)
    reason: str = Field(description="CamelCase reason, e.g. DrainBlocked, StageFailed.", max_length=128)
    message: str = Field(
        default="", description="Details (blocking pod and PDB, failed stage...).", max_length=4096
    )


class NodeProfileStatus(ApiModel):
    """Observed state, written by the fleetwright controller only."""

    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation the status reflects.", ge=0
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Progressing, Paused, Blocked, Degraded (metav1.Condition).",
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    phase: Phase | None = Field(
        default=None,
        description="A one-word summary of the conditions for kubectl get. `Aborted` holds until the "
        "profile's spec changes (a new generation) or a human resumes it (pauses and resumes); an edit "
        "of the DeploymentPolicy alone does not restart an aborted rollout.",
    )
    policy: str | None = Field(
        default=None,
        description="The DeploymentPolicy in effect (`builtin-default` when none is referenced).",
        max_length=MAX_NAME,
    )
    nodes_targeted: int = Field(default=0, description="Nodes selected by the profile.", ge=0)
    nodes_complete: int = Field(default=0, description="Nodes on which every package is complete.", ge=0)
    nodes_in_progress: int = Field(default=0, description="Nodes being changed right now.", ge=0)
    nodes_blocked: int = Field(
        default=0,
        description="Nodes that cannot move until something outside the rollout changes (a PDB, protected "
        "pods, a node someone else cordoned holding the maxUnavailable budget...); nodeIssues names them.",
        ge=0,
    )
    nodes_waiting: int = Field(
        default=0,
        description="Nodes that start by themselves later (the rollout's own updates hold the "
        "maxUnavailable budget, or a maintenance window opens): not a problem.",
        ge=0,
    )
    nodes_failed: int = Field(default=0, description="Nodes on which a stage failed.", ge=0)
    progress: str | None = Field(
        default=None, description="`complete/targeted`, e.g. `3/10`, for kubectl get.", max_length=64
    )
    current_step: str | None = Field(
        default=None,
        description="The policy step the rollout is in, e.g. `rollout: canary` or `default: rest (batch 3)`.",
        max_length=512,
    )
    workflow_id: str | None = Field(
        default=None,
        description="Id of the Temporal rollout workflow (`nodeprofile/<name>`).",
        max_length=512,
    )
    node_issues: list[NodeIssue] = Field(
        default_factory=list,
        description="Up to 50 nodes needing attention, with reasons.",
        max_length=50,
    )


class NodeProfile(ApiModel):
    """NodeProfile: the packages a set of nodes must carry."""

    api_version: Literal["fleetwright.io/v1alpha1"] = Field(
        default="fleetwright.io/v1alpha1", description="fleetwright.io/v1alpha1."
    )
    kind: Literal["NodeProfile"] = Field(default="NodeProfile", description="NodeProfile.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Standard object metadata.")
    spec: NodeProfileSpec = Field(description="Desired state: packages, target nodes, safety settings.")
    status: NodeProfileStatus | None = Field(
        default=None, description="Observed state, written by fleetwright."
    )

    @classmethod
    def from_k8s(cls, obj: dict[str, Any]) -> NodeProfile:
        """Parse an object as read from the API server."""
        return cls.model_validate(obj)


def parse_profiles(objects: list[dict[str, Any]]) -> list[NodeProfile]:
    """The NodeProfiles that parse (one that does not cannot hold a taint it never targeted), with
    their status (``sequencing: all`` names what an earlier profile's rollout is stuck on), or
    without it when only the status does not parse."""
    parsed = []
    for obj in objects:
        for candidate in (obj, {k: v for k, v in obj.items() if k != "status"}):
            try:
                parsed.append(NodeProfile.model_validate(candidate))
                break
            except ValidationError:
                continue
    return parsed
