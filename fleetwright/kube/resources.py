"""Reading fleetwright's own custom resources (NodeProfiles, DeploymentPolicies) through the
CustomObjectsApi, e.g. for the admission webhook's lookups.

Returns plain dicts as the apiserver sends them (callers parse them with ``fleetwright.api``);
failures are classified into ``fleetwright.errors``. Besides reads it owns two writes: the status
subresource (``patch_status``), which only the controller calls, and one finalizer
(``add_finalizer`` by the controller, ``remove_finalizer`` by the rollout's clean-up once the
nodes are clean); specs are never written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from pydantic import BaseModel

from fleetwright.api.common import VERSION
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.keys import GROUP
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.errors import NotFoundError
from fleetwright.kube.client import get_json
from fleetwright.kube.errors import classified

# Page size for list calls: large fleets may hold many profiles; keep each response bounded.
_PAGE = 500


def list_objects(api: client.ApiClient, plural: str) -> list[dict[str, Any]]:
    """Every cluster-scoped fleetwright object of ``plural``, following continue tokens."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        query = [("limit", str(_PAGE))] + ([("continue", token)] if token else [])
        with classified(f"list {plural}.{GROUP}"):
            page = get_json(api, f"/apis/{GROUP}/{VERSION}/{plural}", query)
        items.extend(page.get("items", []))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def get_object(api: client.ApiClient, plural: str, name: str) -> dict[str, Any]:
    """One fleetwright object; raises NotFoundError when it does not exist."""
    with classified(f"get {plural}.{GROUP}/{name}"):
        return get_json(api, f"/apis/{GROUP}/{VERSION}/{plural}/{name}")


@dataclass
class ApiResourceLookup:
    """The webhook's ``ResourceLookup`` backed by the live apiserver."""

    api: client.ApiClient

    def policy_names(self) -> set[str]:
        return {o["metadata"]["name"] for o in list_objects(self.api, POLICY_PLURAL)}

    def profile_objects(self) -> list[dict[str, Any]]:
        return list_objects(self.api, PROFILE_PLURAL)

    def policy_registries(self) -> dict[str, list[str]]:
        registries = {}
        for obj in list_objects(self.api, POLICY_PLURAL):
            allowed = (obj.get("spec") or {}).get("allowedRegistries")
            if allowed is not None:
                registries[obj["metadata"]["name"]] = list(allowed)
        return registries

    def profiles_referencing(self, policy: str) -> list[str]:
        names = []
        for obj in list_objects(self.api, PROFILE_PLURAL):
            ref = ((obj.get("spec") or {}).get("deploymentPolicyRef") or {}).get("name")
            if ref == policy:
                names.append(obj["metadata"]["name"])
        return sorted(names)


def patch_status(api: client.ApiClient, plural: str, name: str, status: BaseModel) -> dict[str, Any]:
    """Merge-patch the status subresource of one fleetwright object; returns the updated object.

    The patch is the whole derived status with its unset fields as null (removed), so it is a
    replacement that needs no resourceVersion: the status is a view recomputed from the workflow,
    and the last writer is always as right as the first."""
    body: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    for field, info in type(status).model_fields.items():
        body.setdefault(info.alias or field, None)
    custom = client.CustomObjectsApi(api)
    with classified(f"patch status of {plural}.{GROUP}/{name}"):
        obj = cast(
            dict[str, Any],
            custom.patch_cluster_custom_object_status(
                GROUP,
                VERSION,
                plural,
                name,
                {"status": body},
                _content_type="application/merge-patch+json",
            ),
        )
    return obj


def _patch_finalizers(
    api: client.ApiClient, plural: str, obj: dict[str, Any], finalizers: list[str]
) -> dict[str, Any]:
    # The resourceVersion makes a concurrent finalizer edit a 409 (retryable), never a lost write.
    meta = obj["metadata"]
    body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
    custom = client.CustomObjectsApi(api)
    with classified(f"patch finalizers of {plural}.{GROUP}/{meta['name']}"):
        return cast(
            dict[str, Any],
            custom.patch_cluster_custom_object(
                GROUP, VERSION, plural, meta["name"], body, _content_type="application/merge-patch+json"
            ),
        )


def add_finalizer(api: client.ApiClient, plural: str, obj: dict[str, Any], finalizer: str) -> dict[str, Any]:
    """Add ``finalizer`` to ``obj`` (as last read); returns the updated object. Idempotent."""
    current = list(obj["metadata"].get("finalizers") or [])
    if finalizer in current:
        return obj
    return _patch_finalizers(api, plural, obj, [*current, finalizer])


def remove_finalizer(api: client.ApiClient, plural: str, name: str, uid: str, finalizer: str) -> bool:
    """Remove ``finalizer`` from the object ``name`` if it is still the object ``uid``; True when
    it was removed now. Idempotent: a gone object, a namesake or a released finalizer is done."""
    try:
        obj = get_object(api, plural, name)
    except NotFoundError:
        return False
    current = list(obj["metadata"].get("finalizers") or [])
    if (uid and obj["metadata"].get("uid") != uid) or finalizer not in current:
        return False
    _patch_finalizers(api, plural, obj, [f for f in current if f != finalizer])
    return True
