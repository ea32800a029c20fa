"""Workflow inputs, control messages and the progress they publish (pydantic, Temporal payloads).

The rollout workflow carries ``RolloutInput`` across continue-as-new: the CRs it serves, the
planner's state, the human controls received so far and node results not yet folded in.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field

from fleetwright.activities.payloads import Controls, DecideReport, DecideRequest, NodeResult
from fleetwright.api.common import LabelSelector, Toleration
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.nodeprofile import DrainSpec, NodeProfile, Package
from fleetwright.planner.base import Frozen
from fleetwright.planner.nodestate import PackageRecord
from fleetwright.planner.nodework import NodeWork
from fleetwright.planner.packages import DesiredPackage
from fleetwright.planner.spec import RollbackOf
from fleetwright.planner.state import RolloutState
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

DEFAULT_AGENT_IMAGE = "ghcr.io/fleetwright/agent:0.1.0"


class EngineSettings(Frozen):
    """Operator-level knobs the workflows need (activity tuning lives with the worker)."""

    # Each attribute's docstring is its description in the chart's schema and the settings reference.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    agent_image: str = DEFAULT_AGENT_IMAGE
    """The agent image every stage Job runs (it executes the package's steps on the host root)."""
    host_root: str = Field(default="/", pattern=r"^/")
    """The node directory stage Jobs mount as the host root (the agent chroots into it). Always
    ``/`` on a real fleet; a test node points it at a scratch root tree so nothing a package runs
    can reboot or retune the machine the tests run on."""
    observe_interval_seconds: int = Field(default=30, ge=1)
    """Re-observe the fleet at least this often while something outside the rollout can change its
    next step (a blocked node, budget held by someone else, a soak health gate). Node reports, the
    controller's signals (spec and node changes) and the rollout's own timers wake it by themselves,
    so a rollout waiting only for its running nodes does not re-observe."""
    ended_check_seconds: int = Field(default=120, ge=1)
    """How often a rollout with running nodes looks for node workflows that ended without reporting
    (terminated or timed out in Temporal): the longest such a node keeps its claim on the budget."""
    reboot_timeout_seconds: int = Field(default=1800, ge=1)
    """How long a rebooting node may take to come back with a new boot id before it fails."""
    protected_pods_timeout_seconds: int = Field(default=6 * 3600, ge=1)
    """How long a node waits for its protected pods (podNonInterruptLabels) to finish before the
    node fails (it shows as blocked meanwhile)."""
    history_events_before_continue: int = Field(default=2000, ge=100)
    """Continue the rollout workflow as new past this many history events."""
    history_bytes_before_continue: int = Field(default=4 * 1024 * 1024, ge=64 * 1024)
    """Also continue as new past this history size: at thousands of nodes every turn carries the
    rollout's node lists, so bytes reach the server's 50 MB limit before events reach theirs."""
    package_namespace: str = Field(
        default=PACKAGE_NAMESPACE,
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    )
    """Namespace of the package stage Jobs and their ConfigMaps. It must exist: the chart creates it
    (privileged for Pod Security, the one namespace that is) and grants the worker only namespaced
    rights in it; the worker never creates a namespace."""
    stage_pod_labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels on every stage pod (cost attribution; the simulated fleet reads outcomes here)."""
    stage_pod_annotations: dict[str, str] = Field(default_factory=dict)
    """Extra annotations on every stage pod."""
    stage_backoff_limit: int | None = Field(default=None, ge=0)
    """Override the stage Jobs' backoffLimit (default 3)."""
    image_pull_timeout_seconds: int = Field(default=300, ge=1)
    """How long a stage pod may fail to pull its image before the stage fails (the node shows as
    blocked meanwhile)."""
    drain_poll_seconds: float = Field(default=5.0, gt=0)
    """How often a drain re-checks the pods it evicts and the PodDisruptionBudgets that hold them."""
    search_attributes: bool = True
    """Publish the Fleetwright* search attributes (those the namespace lacks are skipped and named
    in the NodeProfile's Searchable condition either way)."""


class RolloutInput(Frozen):
    profile: NodeProfile
    policy: DeploymentPolicy
    previous: NodeProfile | None = None
    """The profile as it was before its packages last changed: what a rollback returns to."""
    settings: EngineSettings = EngineSettings()
    state: RolloutState | None = None
    controls: Controls = Controls()
    results: tuple[NodeResult, ...] = ()
    """Node results received but not yet folded into the state by ``decide``."""


class SpecChange(Frozen):
    """A new generation of the NodeProfile or a changed DeploymentPolicy."""

    profile: NodeProfile
    policy: DeploymentPolicy


class Deletion(Frozen):
    """The NodeProfile is being deleted (its last generation). Without a policy (it was deleted
    first) the removal keeps pacing by the policy the rollout already has."""

    profile: NodeProfile
    policy: DeploymentPolicy | None = None


class NodeInput(Frozen):
    profile: str
    profile_uid: str
    generation: int
    target: str
    since: datetime | None = None
    """When the rollout of ``target`` began: with it, names the rollout in each package record's
    ``before`` (what a rollback returns to). None: nothing is recorded."""
    node: str
    parent_workflow_id: str
    work: NodeWork
    records: dict[str, PackageRecord] = Field(default_factory=dict)
    desired: tuple[DesiredPackage, ...] = ()
    packages: tuple[Package, ...] = ()
    drain: DrainSpec = DrainSpec()
    protected_pods: LabelSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    node_order: int = 0
    attempt: int = 0
    """How many times a human retried this node: a retry runs new stage Jobs."""
    runtime_required: bool = False
    """The profile is runtime-required: once complete here, release the node's runtime taint."""
    settings: EngineSettings = EngineSettings()
    unregistered_search_attributes: tuple[str, ...] = ()
    """Search attributes the namespace lacks when the node started: not upserted."""


class Progress(Frozen):
    """What the rollout publishes for humans and the controller: memo, details, query."""

    profile: str
    phase: str
    message: str
    step: str = ""
    targeted: int = 0
    updated: int = 0
    """Targeted nodes that carry every package of the current target."""
    running: int = 0
    failed: int = 0
    blocked: int = 0
    """Nodes that cannot move until something outside the rollout changes (a PDB, a node
    someone cordoned holding the budget, a NotReady node...)."""
    waiting: int = 0
    """Nodes that start by themselves later: the rollout's own work holds the budget, or a window
    opens. Not a problem: a healthy rollout with ``maxUnavailable: 1`` has all but one waiting."""
    max_unavailable: int = 0
    running_nodes: tuple[str, ...] = ()
    failed_nodes: tuple[str, ...] = ()
    failed_reasons: dict[str, str] = Field(default_factory=dict)
    """node -> what failed on it (the stage and package) for the first failed nodes."""
    blocked_nodes: tuple[str, ...] = ()
    blocked_reasons: dict[str, str] = Field(default_factory=dict)
    """node -> reason for the first blocked nodes (drain blocked by PDB X for pod Y, ...)."""
    waiting_reasons: dict[str, str] = Field(default_factory=dict)
    """node -> what it waits for, for the first waiting nodes."""
    paused: bool = False
    generation: int = 0
    target: str = ""
    deleting: bool = False
    """The profile is being deleted: this rollout uninstalls, then cleans the nodes up."""
    rolled_back_generation: int | None = None
    """Set while the rollout rolls back and after it: the NodeProfile generation whose rollout
    the failure rule rolled back (it waits for a spec with other packages)."""
    rolled_back: RollbackOf | None = None
    """With ``rolled_back_generation``: the rollout rolled back (a node still to return records it
    in a package's ``before``)."""
    unregistered_search_attributes: tuple[str, ...] = ()
    """fleetwright's search attributes the Temporal namespace lacks (not published)."""


__all__ = ["Controls", "DecideReport", "DecideRequest", "NodeResult"]
