"""The Temporal workflow ids of a profile's rollout and of its node workflows: what the controller
starts, the CLI reads and the rollout addresses its children by.

Owns the two id formats; it imports nothing, so a CLI command can name a workflow without
importing the workflows themselves."""

from __future__ import annotations


def rollout_workflow_id(profile: str) -> str:
    return f"nodeprofile/{profile}"


def node_workflow_id(profile: str, node: str) -> str:
    return f"node/{profile}/{node}"
