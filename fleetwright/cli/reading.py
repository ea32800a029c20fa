"""What the operator commands read: a NodeProfile and its DeploymentPolicy, the profile's targeted
Nodes, and the progress its rollout workflow published (the memo, read by describe like the
controller does, so no worker needs to be running; never a query).

It owns turning "not there" into errors that name the object. It must not write anything.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.api.deploymentpolicy import BUILTIN_POLICY, DeploymentPolicy
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.cli.session import CliError, Session
from fleetwright.errors import NotFoundError
from fleetwright.kube.nodes import list_nodes
from fleetwright.kube.resources import get_object
from fleetwright.planner import convert
from fleetwright.workflows.payloads import Progress


async def profile_object(session: Session, name: str) -> dict[str, Any]:
    try:
        return await asyncio.to_thread(get_object, session.api, PROFILE_PLURAL, name)
    except NotFoundError as error:
        raise CliError(f"NodeProfile {name!r} not found in the cluster at {session.server}") from error


def parse_profile(obj: dict[str, Any]) -> NodeProfile:
    try:
        return NodeProfile.from_k8s(obj)
    except ValidationError as error:
        raise CliError(f"NodeProfile {obj['metadata']['name']!r} does not parse: {error}") from error


async def policy_of(session: Session, profile: NodeProfile) -> DeploymentPolicy | None:
    """The referenced policy, the built-in default, or None when the referenced one is missing."""
    ref = profile.spec.deployment_policy_ref
    if ref is None:
        return BUILTIN_POLICY
    try:
        obj = await asyncio.to_thread(get_object, session.api, POLICY_PLURAL, ref.name)
    except NotFoundError:
        return None
    try:
        return DeploymentPolicy.from_k8s(obj)
    except ValidationError:
        return None


async def targeted_nodes(session: Session, profile: NodeProfile) -> list[dict[str, Any]]:
    nodes = await asyncio.to_thread(list_nodes, session.api)
    return [n for n in nodes if convert.targets(profile, n["metadata"].get("labels") or {})]


async def node_object(session: Session, name: str) -> dict[str, Any]:
    nodes = await asyncio.to_thread(list_nodes, session.api)
    found = next((n for n in nodes if n["metadata"]["name"] == name), None)
    if found is None:
        raise CliError(f"node {name!r} not found in the cluster at {session.server}")
    return found


async def describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def progress_of(description: WorkflowExecutionDescription | None) -> Progress | None:
    if description is None:
        return None
    progress: Progress | None = await description.memo_value("progress", None, type_hint=Progress)
    return progress
