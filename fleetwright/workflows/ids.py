"""The Temporal workflow ids of a profile's rollout and of its node workflows: what the controller
starts, the CLI reads and the rollout addresses its children by.

Owns the two id formats; it imports nothing, so a CLI command can name a workflow without
importing the workflows themselves."""

from __future__ import annotations


def rollout_workflow_id(profile: str) -> str:
    return f"nodeprofile/{profile}"


def node_workflow_id(profile: str, node: str) -> str:
    return f"node/{profile}/{node}"


CAMPAIGN_PREFIX = "campaign/"


def campaign_workflow_id(campaign: str) -> str:
    return f"{CAMPAIGN_PREFIX}{campaign}"


def campaign_of(workflow_id: str) -> str:
    """The Campaign a campaign workflow's id names."""
    return workflow_id.removeprefix(CAMPAIGN_PREFIX)


def member_profile(campaign: str, cluster: str) -> str:
    """The profile name a campaign's rollout carries in one member cluster: its rollout's workflow
    id, its node workflows' ids and the keys it writes on that cluster's nodes follow from it, so
    two members' nodes of the same name never share a workflow. A DNS label, as every profile name
    (``api.campaign`` bounds both names)."""
    return f"{campaign}-{cluster}"


def member_task_queue(task_queue: str, kubeconfig_secret: str) -> str:
    """The task queue of a member cluster's workflows and activities, by the Secret that holds
    the cluster's kubeconfig: the worker polls it with a client built from that Secret."""
    return f"{task_queue}@{kubeconfig_secret}"
