"""Inputs and outputs of the Kubernetes activities: the contract between workflows and activities.

Pydantic models (Temporal payloads through the pydantic data converter). Workflows build requests
and read reports; activities never return raw Kubernetes objects. Activity names are explicit
strings in ``NAMES`` so a rename of a Python function never breaks running workflows.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from fleetwright.api.common import LabelSelector
from fleetwright.api.compat import added_fields
from fleetwright.api.health import ExternalValidator, MetricCheck
from fleetwright.api.nodeprofile import DrainSpec, NodeProfile
from fleetwright.planner.base import Frozen
from fleetwright.planner.node.state import NodePackageState, PackageRecord
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.planner.rollout.state import BlockedNode, Decision, RolloutState
from fleetwright.stagejob.outcome import StageReport
from fleetwright.stagejob.render import PACKAGE_NAMESPACE
from fleetwright.stagejob.request import StageJob
from fleetwright.stagejob.validation import ValidationJob


class NodeTarget(Frozen):
    profile: str
    node: str


class NodePhase(StrEnum):
    IN_PROGRESS = "InProgress"
    COMPLETE = "Complete"
    FAILED = "Failed"
    BLOCKED = "Blocked"


NODE_FINISHED_SIGNAL = "node_finished"
"""The rollout workflow's signal that carries a node workflow's ``NodeResult``."""
END_QUARANTINE_SIGNAL = "end_quarantine"
"""The node workflow's signal that stops re-gating a hardware-suspect node: a human released it
(``fleetwright release``), or a new pass over the node is starting."""


class NodeResult(Frozen):
    node: str
    target: str
    """The rollout target (``RolloutSpec.target``) the node worked towards."""
    status: RunStatus
    message: str = ""
    spared: bool = False
    """Succeeded through its preflight: its checks passed in service, it was never cordoned."""
    _since_0_1_0 = added_fields("spared")


class NodeReport(Frozen):
    """A node workflow's result and the rollout workflow it goes to."""

    rollout_workflow_id: str
    result: NodeResult


class StatusNote(Frozen):
    """A node status an activity publishes itself, before or after its own work: the node workflow's
    first and last status ride on its first and last activities instead of one activity each (each
    activity costs the node a workflow task, queued behind every other node's on the worker)."""

    phase: NodePhase
    reason: str
    message: str = ""
    report: NodeReport | None = None
    """Sent to the rollout once the status shows (``activities.report``): a node's Complete status
    carries its result, so the node workflow completes without a workflow task spent signalling."""


class CordonRequest(NodeTarget):
    show_before: StatusNote | None = None


class UncordonRequest(NodeTarget):
    show_after: StatusNote | None = None
    """Published once the cordon is lifted (a node that is gone shows nothing)."""


class CordonReport(Frozen):
    ours: bool
    """The node is unschedulable through our cordon (we must uncordon it afterwards)."""
    foreign: bool
    """Someone else had cordoned it: we work under that cordon and never lift it."""


class WaitTarget(NodeTarget):
    """A node whose activity may wait on something a human may have to clear (a PDB, protected
    pods, an image that does not pull)."""

    rollout_workflow_id: str = ""
    """The rollout to tell as soon as such a wait starts or stops holding the node, so it shows it
    at once instead of at its next observe interval; empty: nobody to tell."""


class ProtectedPodsRequest(WaitTarget):
    selector: LabelSelector
    timeout_seconds: int


class DrainRequest(WaitTarget):
    drain: DrainSpec
    package_namespace: str = PACKAGE_NAMESPACE
    poll_seconds: float = Field(default=5.0, gt=0)
    """How often a refused eviction (PDB) is retried, as ``kubectl drain`` does every 5 s."""


class DrainReport(Frozen):
    evicted: tuple[str, ...] = ()
    """``namespace/name`` of every pod that was evicted and is gone."""
    skipped: tuple[str, ...] = ()
    """Pods left in place by rule (DaemonSet, mirror, ours, tolerating unschedulable)."""
    blocked_seconds: float = 0.0
    """How long PodDisruptionBudgets held the drain."""


class StageRequest(StageJob, WaitTarget):
    """The run-stage activity's request: the stage Job, and what the activity does around it."""

    image_pull_timeout_seconds: int = Field(default=300, ge=1)
    """A pod still unable to pull its image this long after creation fails the stage as
    ``ImagePullFailed`` instead of hanging (NodeWright #306)."""
    record: NodePackageState | None = None
    """The node's package state to record once the stage succeeded, by the activity running it
    (no activity of its own); None: nothing to record."""
    reboot_timeout_seconds: int | None = Field(default=None, ge=1)
    """A reboot interrupt's wait, in this activity: the node's boot id is read before the Job is
    created (and kept on the Job, so a retry compares with the same one); once the Job succeeded,
    the node must report another boot id and be Ready within this many seconds of the Job's end
    (``RebootTimeout``). ``record`` is written once it is back. None: no wait here."""
    show_before: StatusNote | None = None
    show_after: StatusNote | None = None
    """Published once the stage succeeded (and ``record`` was written): the node's last status."""


class ValidationRequest(ValidationJob, WaitTarget):
    """The run-validation activity's request: the validation Job, and what the activity does
    around it."""

    image_pull_timeout_seconds: int = Field(default=300, ge=1)
    """A pod still unable to pull its image this long after creation fails the validation."""
    show_before: StatusNote | None = None
    """The node's status shown before the Job starts (which validation runs)."""


class StagesRequest(NodeTarget):
    """A node's consecutive stages, run in order by one activity (one workflow task for all of
    them instead of one per stage). Each stage's ``record`` is the state once it and every stage
    before it passed: it is what the activity writes after the stage, and what a retried attempt
    reads back on the Node to resume after the last stage that passed."""

    stages: tuple[StageRequest, ...] = Field(min_length=1)


class StagesReport(Frozen):
    """What one run-stages activity did: the stages an earlier attempt passed (``resumed``: the
    first ``resumed`` stages, recorded on the Node), then each stage this attempt ran, in order,
    up to the first that failed."""

    resumed: int = 0
    reports: tuple[StageReport, ...] = ()
    stopped: bool = False
    """Cancelled (the node's rollout was aborted): the stage running then was finished, no later
    one was started."""

    @property
    def passed(self) -> int:
        """How many of the request's stages passed, from the first."""
        return self.resumed + sum(1 for r in self.reports if r.succeeded)

    @property
    def failure(self) -> StageReport | None:
        return next((r for r in self.reports if not r.succeeded), None)


class RecordStateRequest(NodeTarget):
    state: NodePackageState


class NodeStatusRequest(NodeTarget):
    phase: NodePhase
    reason: str
    message: str = ""
    report: NodeReport | None = None
    """Sent to the rollout once the status shows (``StatusNote.report``)."""


# ----- the rollout's observe-and-decide activity ------------------------------------------------


class Controls(Frozen):
    """Human intent received by signals and updates, carried across continue-as-new."""

    paused: bool = False
    aborted: bool = False
    approvals: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    attempts: dict[str, int] = Field(default_factory=dict)
    """Retries per node, so a retried node gets fresh stage Jobs instead of adopting failed ones."""
    deleting: bool = False
    """The NodeProfile is being deleted: the rollout converges to the removal target, then cleans
    up the nodes and releases the finalizer."""
    rollback: str = ""
    """A rollback demanded from outside, and why (a campaign's failure rule fired in another
    cluster): the rollout returns what it changed whatever its own failure rule says."""
    _since_0_2_0 = added_fields("rollback")


class DecideRequest(Frozen):
    """What the observe-and-decide activity needs: the targeting CR, the planner state, what the
    workflow learned from its children since the last call, the controls and the workflow's now."""

    now: datetime
    profile: NodeProfile
    state: RolloutState
    results: tuple[NodeResult, ...] = ()
    controls: Controls = Controls()
    reset_failed: tuple[str, ...] = ()
    """Nodes a human retried or skipped: their recorded failure is cleared before observing."""
    release_claims: tuple[str, ...] = ()
    """Nodes an earlier decision claimed but the workflow did not start (a pause or abort arrived
    while deciding): this profile's start claim is dropped before observing."""
    ended: tuple[NodeResult, ...] = ()
    """Failed results of node workflows that ended without finishing (terminated, timed out): each
    node is shown failed with the result's message, which drops this profile's start claim."""


class DecideReport(Frozen):
    decision: Decision
    records: dict[str, dict[str, PackageRecord]] = Field(default_factory=dict)
    """The recorded package state of each node to start (the node workflow resumes from it)."""
    node_order: dict[str, int] = Field(default_factory=dict)
    held: tuple[BlockedNode, ...] = ()
    """Running nodes whose node workflow waits on something a human may have to clear (a drain
    held by a PodDisruptionBudget, protected pods, an image that does not pull), with the reason
    their node condition shows. They still count as running (they hold budget) and also as blocked."""
    unregistered_search_attributes: tuple[str, ...] = ()
    """fleetwright's search attributes the Temporal namespace lacks (the worker checked): the
    workflows must not upsert them, and the status names them."""


class CleanupRequest(Frozen):
    """Remove everything one profile wrote on the nodes, then release its NodeProfile finalizer."""

    profile: str
    profile_uid: str
    """The finalizer is released only from this very object (a re-created namesake keeps its own)."""


class CleanupReport(Frozen):
    nodes: tuple[str, ...] = ()
    """Nodes on which something was removed."""
    kept_foreign_cordon: tuple[str, ...] = ()
    """Nodes left unschedulable because someone else cordoned them too."""


class RuntimeTaintReport(Frozen):
    removed: bool = False
    holding: tuple[str, ...] = ()
    """Runtime-required profiles still incomplete on the node (the taint stays while any is)."""


class WorkflowStart(Frozen):
    id: str
    input: dict[str, Any]
    """The workflow's argument as JSON: forwarded untouched (the workflow validates it)."""
    summary: str = ""
    """The Temporal UI's one-line summary of the workflow."""
    details: str = ""
    """The Temporal UI's details of the workflow (Markdown)."""
    search_attributes: dict[str, str | list[str]] = Field(default_factory=dict)
    """The search attributes it starts with: name -> keyword, or keyword list."""


class StartNodesRequest(Frozen):
    """The node workflows one rollout decision starts."""

    workflow: str
    task_queue: str
    decided_at: datetime
    """The workflow's time when it asked: a retried attempt leaves alone a run started since."""
    starts: tuple[WorkflowStart, ...]


NODES_CHANGED_SIGNAL = "nodes_changed"
"""The rollout workflow's signal to re-observe its nodes now (the controller's on Node events, a
held wait's as it starts or stops)."""


class EndedNodesRequest(Frozen):
    """The node workflows a rollout still waits on, all under one id prefix."""

    id_prefix: str
    """Every node workflow id of the profile is this prefix and the node's name: one visibility
    query finds the closed ones."""
    waiting: dict[str, datetime]
    """node -> when the rollout decided to start it: a run that began earlier is a previous one."""
    target: str
    """The rollout target they work towards (the target of a result made up for one)."""
    earlier: tuple[str, ...] = ()
    """Nodes still running work for an earlier target: their runs began before this rollout, so a
    node whose workflow has no open run has ended."""


class EndedNodes(Frozen):
    finished: tuple[NodeResult, ...] = ()
    """Results of node workflows that completed (their report to the rollout was lost)."""
    unfinished: tuple[NodeResult, ...] = ()
    """Failures made up for node workflows that ended otherwise (terminated, timed out, cancelled,
    not found): nothing showed their end on the node."""


class SignatureCheck(Frozen):
    """The policy's ``imageSignatures``, for one generation: which references must carry a cosign
    signature by a key of Secret ``namespace/secret`` over the digest they resolve to."""

    mode: str
    """``enforce`` (refuse the generation) or ``warn`` (report the image and go on)."""
    namespace: str
    secret: str
    references: tuple[str, ...]


class ResolveImagesRequest(Frozen):
    """The image references one rollout generation runs: each resolved once to a digest."""

    profile: str
    references: tuple[str, ...]
    signatures: SignatureCheck | None = None
    """Set only when the policy asks for signatures."""
    _since_0_2_0 = added_fields("signatures")


class ResolvedImages(Frozen):
    """reference -> ``repository@sha256:...``: what every stage Job of the generation runs."""

    pinned: dict[str, str] = Field(default_factory=dict)
    warnings: dict[str, str] = Field(default_factory=dict)
    """reference -> why its signature does not verify (``warn`` mode only)."""
    _since_0_2_0 = added_fields("warnings")


class MeasureRequest(NodeTarget):
    """One measurement of one check of a node gate."""

    check: MetricCheck
    placeholders: dict[str, str] = Field(default_factory=dict)
    """The query's placeholders' values (node, nodes, profile)."""
    show_before: StatusNote | None = None


class ChangedNodesMeasureRequest(Frozen):
    """One measurement of a campaign stage's fleet-gate check in one member cluster, over the nodes
    its rollout (``profile``) changed there."""

    profile: str
    check: MetricCheck
    prometheus_url: str = ""
    """The cluster's Prometheus (empty: the worker's)."""


class ExternalWaitRequest(NodeTarget):
    """Wait for an external validator's verdict on the node."""

    validator: ExternalValidator
    since: datetime
    """When the node's update began: a condition must have turned since."""


class ExternalVerdict(Frozen):
    validator: str
    passed: bool
    message: str


class NAMES:
    """Registered activity names (explicit strings, stable across refactors)."""

    CORDON = "fleetwright.node.cordon"
    UNCORDON = "fleetwright.node.uncordon"
    WAIT_PROTECTED_PODS = "fleetwright.node.wait-protected-pods"
    DRAIN = "fleetwright.node.drain"
    RUN_STAGES = "fleetwright.node.run-stages"
    RECORD_STATE = "fleetwright.node.record-state"
    SET_NODE_STATUS = "fleetwright.node.set-status"
    OBSERVE_AND_DECIDE = "fleetwright.rollout.observe-and-decide"
    START_NODES = "fleetwright.rollout.start-nodes"
    ENDED_NODES = "fleetwright.rollout.ended-nodes"
    CLEAN_UP = "fleetwright.node.clean-up"
    RELEASE_RUNTIME_TAINT = "fleetwright.node.release-runtime-taint"
    MEASURE = "fleetwright.health.measure"
    MEASURE_CHANGED = "fleetwright.health.measure-changed"
    WAIT_EXTERNAL = "fleetwright.health.wait-external"
    RUN_VALIDATION = "fleetwright.node.run-validation"
    RESOLVE_IMAGES = "fleetwright.rollout.resolve-images"
