"""The Campaign resource (short name ``fwc``): one host-layer change rolled across several
clusters as one gated operation.

Owns the campaign schema: the change (a NodeProfile spec), the member clusters (each by a Secret
holding its kubeconfig), the stages of cluster groups with their pacing and gates, and the one
failure rule counted over every cluster; and its single-object rules (mirrored as CEL in the CRD).
Running a campaign is ``workflows.campaign``'s job, deciding it ``planner.campaign``'s. Must not do
I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from fleetwright.api.common import (
    DNS_LABEL_PATTERN,
    MAX_NAME,
    MAX_SHORT_STRING,
    ApiModel,
    LocalRule,
    ObjectMeta,
)
from fleetwright.api.conditions import Condition
from fleetwright.api.health import MAX_CHECKS, CheckName, MetricCheck
from fleetwright.api.nodeprofile import NodeProfileSpec, PolicyReference

KIND = "Campaign"
PLURAL = "campaigns"
MAX_CLUSTERS = 32
MAX_STAGES = 16
MAX_CAMPAIGN_NAME = 31
MAX_CLUSTER_NAME = 31
"""A campaign's rollout in a member carries ``<campaign>-<cluster>`` as its profile name, which
must stay a DNS label (63 characters)."""
KUBECONFIG_KEY = "kubeconfig"
"""The key of a member cluster's Secret that holds its kubeconfig."""
MAX_URL = 2048


class MemberCluster(ApiModel):
    """A cluster the campaign changes, reached with the kubeconfig in a Secret."""

    name: str = Field(
        description="The cluster's name in this campaign (a DNS label): its rollout's workflow id and "
        "the keys it writes on the cluster's nodes carry it.",
        max_length=MAX_CLUSTER_NAME,
        pattern=DNS_LABEL_PATTERN,
    )
    kubeconfig_secret: str = Field(
        description=f"A Secret in fleetwright's namespace whose `{KUBECONFIG_KEY}` key holds a "
        "kubeconfig for the cluster (docs/campaigns.md says what its identity needs).",
        min_length=1,
        max_length=MAX_NAME,
    )
    prometheus_url: str | None = Field(
        default=None,
        description="The Prometheus a stage's fleet gate queries for this cluster's nodes (the worker's "
        "credentials and CA apply). Absent: the worker's prometheusUrl.",
        max_length=MAX_URL,
        pattern=r"^https?://",
    )


class CampaignStage(ApiModel):
    """A group of clusters that roll out together, and the gate before the next stage."""

    name: str = Field(
        description="The stage's name (a DNS label).", max_length=MAX_SHORT_STRING, pattern=DNS_LABEL_PATTERN
    )
    clusters: list[Annotated[str, Field(max_length=MAX_CLUSTER_NAME)]] = Field(
        description="Names of member clusters (each in exactly one stage).",
        min_length=1,
        max_length=MAX_CLUSTERS,
    )
    max_parallel: int | None = Field(
        default=None,
        description="Clusters of the stage rolling out at once (default: all of them).",
        ge=1,
        le=MAX_CLUSTERS,
    )
    policy: PolicyReference | None = Field(
        default=None, description="The DeploymentPolicy of this stage's clusters (default: the campaign's)."
    )
    soak_seconds: int = Field(
        default=0,
        description="After every cluster of the stage completed: how long to wait before the next stage "
        "(after the last stage: before the campaign is Complete).",
        ge=0,
        le=30 * 86400,
    )
    approval: bool = Field(
        default=False,
        description="After the stage (and its soak): wait for `fleetwright campaign approve NAME STAGE`.",
    )
    checks: list[CheckName] = Field(
        default_factory=list,
        description="Fleet gate: names of spec.healthChecks measured, once every cluster of the stage "
        "completed, in each of them over the nodes the campaign changed there ({{nodes}}; "
        "{{profile}} is its rollout's profile), against the cluster's Prometheus. The next stage "
        "starts only once the soak passed and every check passed in every cluster; a Failed one "
        "fires the failure rule, an Inconclusive one waits for the stage's approval, a "
        "MonitoringUnavailable one (Prometheus does not answer) holds the gate until it answers.",
        max_length=MAX_CHECKS,
    )


class CampaignFailure(ApiModel):
    """The one failure rule over every cluster's failed nodes."""

    max_failed_nodes: int = Field(
        default=0,
        description="Failed nodes tolerated over all clusters before `action` fires; 0: the first fires it.",
        ge=0,
    )
    action: Literal["halt", "rollback"] = Field(
        default="halt",
        description="halt: no new node starts in any cluster (nodes already started finish); the "
        "campaign reports Degraded until resumed. rollback: every cluster's rollout returns what it "
        "changed (as its own `failure.action: rollback` would), whatever its own policy says.",
    )


def _stages_cover_clusters(spec: Any) -> bool:
    named = [c for stage in spec.stages for c in stage.clusters]
    return sorted(named) == sorted(c.name for c in spec.clusters) and len(set(named)) == len(named)


def _unique_cluster_names(spec: Any) -> bool:
    return len({c.name for c in spec.clusters}) == len(spec.clusters)


class CampaignSpec(ApiModel):
    """The change, the member clusters, and the order in which they take it."""

    profile: NodeProfileSpec = Field(
        description="The change: a NodeProfile spec, applied in every member cluster."
    )
    policy: PolicyReference | None = Field(
        default=None,
        description="The DeploymentPolicy (in this cluster) each member's rollout runs under, unless its "
        "stage names another (empty: the built-in one node at a time policy).",
    )
    clusters: list[MemberCluster] = Field(
        description="The member clusters.",
        min_length=1,
        max_length=MAX_CLUSTERS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    stages: list[CampaignStage] = Field(
        description="The stages in order; each starts once the one before it completed and its gate passed.",
        min_length=1,
        max_length=MAX_STAGES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    failure: CampaignFailure = Field(
        default_factory=CampaignFailure, description="The failure rule over every cluster."
    )
    health_checks: list[MetricCheck] = Field(
        default_factory=list,
        description="Metric checks (Prometheus queries judged by conditions) the stages' fleet gates refer "
        "to by name.",
        max_length=MAX_CHECKS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    def stage_checks(self, stage: CampaignStage) -> list[MetricCheck]:
        """The checks of ``stage``'s fleet gate, resolved (a name without a check is admission's
        error)."""
        by_name = {c.name: c for c in self.health_checks}
        return [by_name[n] for n in stage.checks if n in by_name]

    local_rules = (
        LocalRule(
            name="unique-clusters",
            cel="self.clusters.all(a, self.clusters.exists_one(b, b.name == a.name))",
            message="clusters: each name once",
            check=_unique_cluster_names,
            field_path=".clusters",
            reason="FieldValueDuplicate",
        ),
        LocalRule(
            name="stages-cover-clusters",
            cel="self.clusters.all(c, self.stages.exists_one(s, c.name in s.clusters)) && "
            "self.stages.all(s, s.clusters.all(n, self.clusters.exists(c, c.name == n)))",
            message="stages: every member cluster in exactly one stage, and no other name",
            check=_stages_cover_clusters,
            field_path=".stages",
        ),
    )


class ClusterStatus(ApiModel):
    """One member cluster's rollout, as the campaign last heard of it."""

    name: str = Field(description="The member cluster.", max_length=MAX_SHORT_STRING)
    phase: str = Field(
        default="Pending",
        description="Pending (its stage has not started), its rollout's phase, or Unreachable.",
        max_length=MAX_SHORT_STRING,
    )
    nodes_targeted: int = Field(default=0, ge=0, description="Nodes its rollout targets.")
    nodes_complete: int = Field(default=0, ge=0, description="Nodes done.")
    nodes_failed: int = Field(default=0, ge=0, description="Nodes failed.")
    message: str = Field(
        default="", max_length=4096, description="What the rollout waits for, or why it stopped."
    )


class CampaignStatus(ApiModel):
    """Observed state, written by the fleetwright controller only."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The generation the status reflects."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Progressing, Paused, Degraded (metav1.Condition).",
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    phase: str | None = Field(default=None, max_length=MAX_SHORT_STRING, description="A one-word summary.")
    stage: str | None = Field(default=None, max_length=MAX_SHORT_STRING, description="The stage in progress.")
    clusters: list[ClusterStatus] = Field(
        default_factory=list, max_length=MAX_CLUSTERS, description="Each member cluster's rollout."
    )
    workflow_id: str | None = Field(default=None, max_length=512, description="Id of the campaign workflow.")


class Campaign(ApiModel):
    """Campaign: one change rolled across member clusters, in stages, under one failure rule."""

    api_version: Literal["fleetwright.io/v1alpha1"] = Field(
        default="fleetwright.io/v1alpha1", description="fleetwright.io/v1alpha1."
    )
    kind: Literal["Campaign"] = Field(default="Campaign", description="Campaign.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Standard object metadata.")
    spec: CampaignSpec = Field(description="The change, the member clusters and their order.")
    status: CampaignStatus | None = Field(default=None, description="Observed state, written by fleetwright.")
