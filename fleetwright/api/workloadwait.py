"""The bounded wait of a DeploymentPolicy for the workloads on a node to finish before the node
starts. Which pods run where is read by the Kubernetes adapter. Must not do I/O.
"""

from __future__ import annotations

from pydantic import Field

from fleetwright.api.common import ApiModel, LabelSelector, selector_required


class WorkloadWait(ApiModel):
    """Before a node starts (is cordoned and drained), wait for the pods on it that ``selector``
    matches to finish, up to ``timeoutSeconds``; then the drain rule applies as always."""

    selector: LabelSelector = Field(description="The pods to wait for (a training job's); must not be empty.")
    timeout_seconds: int = Field(
        description="How long a node waits for them, from the moment it is next in line; then it starts "
        "and its drain evicts what still runs. The wait holds no maxUnavailable budget.",
        ge=60,
        le=7 * 86400,
    )

    local_rules = (selector_required("workload-wait-selector-nonempty", "wait for every pod"),)
