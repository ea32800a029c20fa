"""The rollout engine's operator-level settings (``WorkerSettings.engine``), which the workflows
carry in their inputs.

Kept apart from the other payloads so the settings model, the chart schema and the settings
reference (``fleetwright worker --help``) read them without importing the API models and the
planner. Owns the knobs and their defaults; it must not act on them.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from fleetwright.api.compat import added_fields
from fleetwright.planner.base import Frozen
from fleetwright.stagejob.render import PACKAGE_NAMESPACE

DEFAULT_AGENT_IMAGE = "ghcr.io/fleetwright/agent:0.2.0"


class EngineSettings(Frozen):
    """Operator-level knobs the workflows need (activity tuning lives with the worker)."""

    # Each attribute's docstring is its description in the chart's schema and the settings reference.
    # Read from a payload, an unknown knob (a newer release's) is ignored like in every payload
    # (planner.base.Frozen); the operators' schema stays closed and WorkerSettings refuses one.
    model_config = ConfigDict(
        use_attribute_docstrings=True, json_schema_extra={"additionalProperties": False}
    )

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
    image_pinning: bool = False
    """Resolve each image a rollout generation runs (its packages', the agent's) to a digest once,
    when the generation starts, and run every stage Job of it by that digest: a tag pushed again
    mid-rollout changes nothing. The worker must reach the registries (``registry_ca_file``,
    ``registry_auth_file``); one it cannot reach holds the rollout (ImageUnresolved). Off: each
    node resolves the tags as it pulls (docs/security.md says why this is not yet the default),
    except under a DeploymentPolicy with ``imageSignatures``, whose rollouts are pinned to the
    digests their signatures were checked over."""
    quarantine_regate_seconds: int = Field(default=300, ge=1)
    """How long a hardware-suspect node (its health gate failed again on the version a rollback
    returned it to) rests cordoned before its gate runs again by itself; the pause doubles after
    each run that does not pass, up to an hour (or this, if longer)."""
    heartbeat_timeout_seconds: int = Field(default=30, ge=2, le=600)
    """How long a long activity (a drain, a stage Job, a reboot, a health gate's wait) may go
    without a heartbeat before Temporal gives it to another worker: how soon the work of a worker
    that died resumes. Such an activity heartbeats every third of it (at most every 10 s)."""
    # heartbeat_timeout_seconds: since 0.2.0.
    _since_0_1_0 = added_fields("image_pinning", "quarantine_regate_seconds", "heartbeat_timeout_seconds")
