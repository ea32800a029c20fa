"""Every well-known key fleetwright writes on Kubernetes objects: the ``fleetwright.io`` prefix, the
labels, annotations, taint, finalizer, condition types and reasons, and the one rule that fits a
per-profile key into the 63 characters Kubernetes allows a key's name part.

They are fleetwright's interface on objects it shares with everything else in the cluster (Nodes,
Jobs, Events): humans, alerts, ``kubectl wait`` and the chart match on them, so every module reads
them from here and none spells one out. The chart repeats a few in its templates; unit tests tie
those to this module. Pure values and functions; no I/O.
"""

from __future__ import annotations

import hashlib

GROUP = "fleetwright.io"
"""The API group of fleetwright's resources, and the prefix of every key it owns."""
PREFIX = f"{GROUP}/"
MAX_NAME_PART = 63
_HASH = 10


def qualified(name: str) -> str:
    """``fleetwright.io/<name>``. A name part longer than 63 characters keeps a prefix of itself
    and a hash of the whole, so any key built from a profile name (a DNS label of up to 63
    characters) is accepted and two profiles never share one; the prefix keeps it readable and
    keeps its kind's prefix (``state.``, ``cordon.``...) for scans."""
    if len(name) > MAX_NAME_PART:
        tag = hashlib.sha256(name.encode()).hexdigest()[:_HASH]
        name = f"{name[: MAX_NAME_PART - _HASH - 1].rstrip('.-_')}-{tag}"
    return PREFIX + name


# ----- on a Node, one of each per profile -------------------------------------------------------
STATE_PREFIX = PREFIX + "state."
"""Every profile's package-state annotation starts with it (``planner.node.state`` owns the value)."""
CORDON_PREFIX = PREFIX + "cordon."
"""Every cordon marker starts with it: the node is unschedulable through that profile's cordon."""
CLAIM_PREFIX = PREFIX + "claim."
"""Every start claim starts with it: a decision started the node, its node workflow has not ended."""


def state_key(profile: str) -> str:
    """The annotation holding the package state ``profile`` recorded on the node."""
    return qualified("state." + profile)


def cordon_key(profile: str) -> str:
    """The annotation marking a cordon ``profile``'s node workflow made (and must lift)."""
    return qualified("cordon." + profile)


def claim_key(profile: str) -> str:
    """The annotation a decision of ``profile`` writes when it starts the node."""
    return qualified("claim." + profile)


def status_label_key(profile: str) -> str:
    """The label summing up ``profile``'s progress on the node (a ``NodePhase`` value)."""
    return qualified("status." + profile)


def condition_type(profile: str) -> str:
    """The node condition showing ``profile``'s progress on the node, with a reason below."""
    return qualified(profile)


def unit_wait_condition_type(profile: str) -> str:
    """The node condition (``True``, reason ``ProfileReason.WAITING_FOR_UNIT``) on a node
    ``profile``'s rollout holds for another node of its workload unit; removed when the wait ends."""
    return qualified("unit-wait." + profile)


RUNTIME_REQUIRED_TAINT = PREFIX + "runtime-required"
"""``NoSchedule`` until every runtime-required profile selecting the node is complete there."""

# ----- on a NodeProfile ------------------------------------------------------------------------
FINALIZER = PREFIX + "node-cleanup"
"""Held until what the profile wrote on its nodes is removed."""
PAUSED_ANNOTATION = PREFIX + "paused"
"""``"true"``: a human paused the rollout (durable intent; the CLI sets and removes it)."""

# ----- on a stage Job and its pods --------------------------------------------------------------
PROFILE_LABEL = PREFIX + "profile"
NODE_LABEL = PREFIX + "node"
PACKAGE_LABEL = PREFIX + "package"
STAGE_LABEL = PREFIX + "stage"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "fleetwright"
NODE_NAME_ANNOTATION = PREFIX + "node-name"
PACKAGE_VERSION_ANNOTATION = PREFIX + "package-version"
GENERATION_ANNOTATION = PREFIX + "generation"
COPY_DIR_ANNOTATION = PREFIX + "copy-dir"
OUTCOME_ANNOTATION = PREFIX + "outcome"
"""An image-pull verdict written on the Job, so a retried activity adopting it reports it again."""
OUTCOME_MESSAGE_ANNOTATION = PREFIX + "outcome-message"
BOOT_ID_BEFORE_ANNOTATION = PREFIX + "boot-id-before"
"""A reboot interrupt's Job: the node's boot id before it, compared with by every retry."""

# ----- Events and admission ---------------------------------------------------------------------
NODE_ACTIVITIES_REPORTER = PREFIX + "node-activities"
"""The reporting controller of the node activities' Events."""
CONTROLLER_REPORTER = PREFIX + "controller"
"""The reporting controller of the controller's Events."""
WEBHOOK_NAME = f"validate.{GROUP}"
"""The validating webhook's name in its ValidatingWebhookConfiguration (the chart's too)."""
NODE_WEBHOOK_NAME = f"runtime-taint.{GROUP}"
"""The Node CREATE mutation's name in its MutatingWebhookConfiguration (the chart's too)."""

# ----- NodeProfile and DeploymentPolicy condition types -----------------------------------------
READY = "Ready"
PROGRESSING = "Progressing"
PAUSED = "Paused"
BLOCKED = "Blocked"
DEGRADED = "Degraded"
DELETING = "Deleting"
"""Only while the profile is being deleted: True, reason Uninstalling or DeletionBlocked."""
SEARCHABLE = "Searchable"
"""Whether the rollout's Temporal namespace has fleetwright's search attributes: False names the
missing ones (the rollout runs without them; the Temporal UI cannot find it by them)."""
IN_USE = "InUse"
"""A DeploymentPolicy's: profiles reference it."""


class NodeReason:
    """Reasons of a node's per-profile condition (``condition_type``) and of its Events."""

    UPDATING = "Updating"
    COMPLETE = "Complete"
    ABORTED = "Aborted"
    """An aborted node workflow ends Blocked with it."""
    FAILED = "StageFailed"
    """A stage, or a bounded wait before it, failed; the message says which. The same word as the
    profile's node issue for the node (``ProfileReason.STAGE_FAILED``)."""
    WORKFLOW_ENDED = "NodeWorkflowEnded"
    """The node workflow ended without finishing (terminated or timed out in Temporal); the rollout
    counts the node as failed and drops its start claim."""
    RESET = "Reset"
    """``fleetwright node reset`` forgot what the profile recorded there."""
    DRAIN_BLOCKED = "DrainBlocked"
    DRAIN_TIMEOUT = "DrainTimeout"
    DRAINED = "Drained"
    PROTECTED_PODS_RUNNING = "NonInterruptPodsRunning"
    PROTECTED_PODS_TIMEOUT = "ProtectedPodsTimeout"
    PROTECTED_PODS_GONE = "ProtectedPodsGone"
    IMAGE_PULL_WAITING = "ImagePullWaiting"
    IMAGE_PULLED = "ImagePulled"
    HEALTH_GATE = "HealthGate"
    """The node passed its stages and is held, cordoned, while its node gate's checks measure."""
    GATE_PASSED = "HealthGatePassed"
    """A gated node's Complete: its stages and its node gate passed (or a human approved it)."""
    GATE_FAILED = "HealthGateFailed"
    """A node gate check was Failed; the message names the check and its value."""
    GATE_INCONCLUSIVE = "HealthGateInconclusive"
    """A node gate check was Inconclusive: the node waits, cordoned, for fleetwright approve
    (``gate/<node>``) or abort."""
    MONITORING_UNAVAILABLE = "MonitoringUnavailable"
    """A node gate check had more Errors in a row than its consecutiveErrorLimit (Prometheus did
    not answer): the node waits, cordoned, measuring on; the first answer lifts the hold, and
    fleetwright approve (``gate/<node>``) or abort end it too."""
    HARDWARE_SUSPECT = "HardwareSuspect"
    """A node that failed its health gate failed it again on the version a rollback returned it
    to (or the rollback stopped before it passed): its hardware, not the change, is suspect. It
    stays cordoned and Failed until a gate passes or a human releases it (``fleetwright
    release``)."""
    PREFLIGHT = "Preflight"
    """The node runs its packages' checks in service, before any cordon (``preflight: true``)."""
    PREFLIGHT_PASSED = "PreflightPassed"
    """A node's Complete when its preflight passed: recorded at the target, never cordoned."""
    RELEASED = "Released"
    """A human put a node that failed its health gate back into service (``fleetwright release``)."""


class ProfileReason:
    """Reasons of a NodeProfile's conditions, node issues and Events."""

    POLICY_NOT_FOUND = "PolicyNotFound"
    ROLLOUT_PENDING = "RolloutPending"
    ROLLOUT_STARTING = "RolloutStarting"
    ROLLOUT_STARTED = "RolloutStarted"
    ROLLING_OUT = "RollingOut"
    ROLLOUT_IN_PROGRESS = "RolloutInProgress"
    WAITING = "Waiting"
    ROLLOUT_COMPLETE = "RolloutComplete"
    NODES_NOT_UPDATED = "NodesNotUpdated"
    ROLLOUT_HALTED = "RolloutHalted"
    ROLLING_BACK = "RollingBack"
    ROLLED_BACK = "RolledBack"
    ROLLOUT_ABORTED = "RolloutAborted"
    ROLLOUT_BLOCKED = "RolloutBlocked"
    ROLLOUT_PAUSED = "RolloutPaused"
    ROLLOUT_RESUMED = "RolloutResumed"
    PAUSED = "Paused"
    PAUSED_BY_USER = "PausedByUser"
    NOT_PAUSED = "NotPaused"
    NODES_BLOCKED = "NodesBlocked"
    NOT_BLOCKED = "NotBlocked"
    NODES_FAILED = "NodesFailed"
    NOT_DEGRADED = "NotDegraded"
    SPEC_CHANGE_PENDING = "SpecChangePending"
    SPEC_CHANGE_ACCEPTED = "SpecChangeAccepted"
    DELETING = "Deleting"
    DELETION_PENDING = "DeletionPending"
    DELETION_STARTED = "DeletionStarted"
    UNINSTALLING = "Uninstalling"
    DELETION_BLOCKED = "DeletionBlocked"
    NODES_CLEANED_UP = "NodesCleanedUp"
    STAGE_FAILED = "StageFailed"
    """A node issue: a stage failed there."""
    NODE_BLOCKED = "NodeBlocked"
    """A node issue: the node waits on something a human may have to clear."""
    WAITING_FOR_UNIT = "WaitingForUnit"
    """A node issue, and the kind of the node's waiting reason: the node waits, within a bound, for
    another node of its workload unit that cannot start now (NotReady, busy)."""
    RUNTIME_TAINT_ADDED = "RuntimeTaintAdded"
    SEARCH_ATTRIBUTES_REGISTERED = "SearchAttributesRegistered"
    SEARCH_ATTRIBUTES_MISSING = "SearchAttributesMissing"
