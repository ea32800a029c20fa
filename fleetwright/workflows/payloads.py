"""Workflow inputs, control messages and the progress they publish (pydantic, Temporal payloads).

The rollout workflow carries ``RolloutInput`` across continue-as-new: the CRs it serves, the
planner's state, the human controls received so far and node results not yet folded in.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from fleetwright.activities.payloads import Controls, DecideReport, DecideRequest, NodeResult
from fleetwright.api.campaign import Campaign
from fleetwright.api.common import LabelSelector, Toleration
from fleetwright.api.compat import added_fields
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.health import ExternalValidator, MetricCheck, ValidationContainer
from fleetwright.api.nodeprofile import DrainSpec, NodeProfile, Package
from fleetwright.planner.base import Frozen
from fleetwright.planner.campaign import CampaignState, ClusterReport
from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.node.state import PackageRecord
from fleetwright.planner.node.work import NodeWork
from fleetwright.planner.rollout.spec import RollbackOf
from fleetwright.planner.rollout.state import RolloutState
from fleetwright.workflows.enginesettings import EngineSettings


class ImagePins(Frozen):
    """The digests one generation of the profile runs: each image reference (its packages', the
    agent's) as the registry resolved it when the generation started."""

    generation: int
    pinned: dict[str, str] = Field(default_factory=dict)
    """reference -> ``repository@sha256:...`` (the reference itself when pinning is off)."""
    warnings: dict[str, str] = Field(default_factory=dict)
    """reference -> why its signature does not verify, when the policy only warns."""
    _since_0_2_0 = added_fields("warnings")


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
    pins: ImagePins | None = None
    """The current generation's image digests, once resolved."""
    _since_0_1_0 = added_fields("pins")


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
    gate: tuple[MetricCheck, ...] = ()
    """The node gate's checks: measured after the last stage, before the cordon is lifted."""
    external: tuple[ExternalValidator, ...] = ()
    """The node gate's external validators, waited for together with ``gate``."""
    batch: tuple[str, ...] = ()
    """With ``gate``: the nodes the decision started with this one (the ``{{nodes}}`` placeholder)."""
    validations: tuple[ValidationContainer, ...] = ()
    """The node gate's validation containers: run one after another on the node, cordoned and
    drained, after its last stage and before ``gate`` and ``external``."""
    regate: bool = False
    """A rollback returns this node after its health gate failed: it keeps fleetwright's cordon
    (an abort never lifts it) and runs the node gate on the returned version; failing it again
    leaves it Failed as hardware suspect."""
    preflight: bool = False
    """Run the work's checks in service before any cordon (``planner.node.preflight``); a node whose
    checks pass is recorded at the target and spared."""
    _since_0_1_0 = added_fields("gate", "batch", "external", "validations", "regate", "preflight")


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
    images: dict[str, str] = Field(default_factory=dict)
    """image reference -> the digest every stage Job of this generation runs."""
    spared: int = 0
    """Nodes the preflight found carrying the target: recorded, never cordoned (0 without it)."""
    image_warnings: dict[str, str] = Field(default_factory=dict)
    """image reference -> why its signature does not verify (the policy's imageSignatures warns)."""
    _since_0_1_0 = added_fields("images", "spared", "image_warnings")


__all__ = ["Controls", "DecideReport", "DecideRequest", "NodeResult"]


class ClusterProgress(Frozen):
    """A campaign's member rollout reports to its campaign (signal ``cluster_progress``): sent by
    the rollout whenever what it reports changed."""

    workflow_id: str
    """The member rollout's workflow id: the campaign knows which cluster it serves."""
    report: ClusterReport


class CampaignInput(Frozen):
    """The campaign workflow's input, and what it carries across continue-as-new."""

    campaign: Campaign
    policies: dict[str, DeploymentPolicy] = Field(default_factory=dict)
    """DeploymentPolicy name -> the policy, for every policy the campaign and its stages name
    (resolved by the controller in fleetwright's cluster); "" is the built-in policy."""
    settings: EngineSettings = EngineSettings()
    state: CampaignState = CampaignState()
    reports: dict[str, ClusterReport] = Field(default_factory=dict)
    """cluster -> what its rollout last reported."""
    children: tuple[str, ...] = ()
    """Clusters whose rollout workflow was started (it runs on: a new generation retargets it)."""
    paused: bool = False
    aborted: bool = False


class CampaignChange(Frozen):
    """A new generation of the Campaign (signal ``spec_changed``), with the policies it names."""

    campaign: Campaign
    policies: dict[str, DeploymentPolicy] = Field(default_factory=dict)


class CampaignProgress(Frozen):
    """What the campaign publishes (memo ``progress``, the ``progress`` query)."""

    campaign: str
    phase: str
    message: str
    generation: int = 0
    """The Campaign's generation the workflow runs (an abort holds for it)."""
    stage: str = ""
    clusters: dict[str, ClusterReport] = Field(default_factory=dict)
    """cluster -> its rollout's last report (``Pending`` before its stage starts it)."""
    rollouts: dict[str, str] = Field(default_factory=dict)
    """cluster -> its rollout's workflow id, once started."""
