"""The validating admission webhook's answers: an AdmissionReview of a NodeProfile, a
DeploymentPolicy or a Campaign in, an AdmissionReview out, from the pure validator
(``fleetwright.api.validation``), every error with its field path. Cluster facts the validator
needs (which policies exist, which profiles reference a policy, the NodeProfiles) come through
the small ``ResourceLookup`` protocol supplied by the caller, so this module never talks to the
API itself. The operator's image rules (``AdmissionPolicy``: digest pinning, allowed registries,
read from a file by ``load_admission_policy``) are applied to every NodeProfile and Campaign
create and update.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from fleetwright.api.campaign import PLURAL as CAMPAIGN_PLURAL
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.keys import GROUP
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.api.validation import (
    AdmissionPolicy,
    Issue,
    Result,
    policy_refs,
    validate_campaign,
    validate_deploymentpolicy,
    validate_nodeprofile,
    validate_policy_deletion,
)

log = logging.getLogger(__name__)

# Kubernetes truncates long warnings; keep each one readable.
_MAX_WARNING = 256
# The JSON file with the operator's image rules (the chart renders its ``admission`` values there).
# Named like a WorkerSettings override (FLEETWRIGHT_<FIELD>) of a future ``admission_file`` path.
ADMISSION_ENV = "FLEETWRIGHT_ADMISSION_FILE"


class AdmissionPolicyError(ValueError):
    """The admission policy file is unreadable or invalid; the message names the file and field."""


def load_admission_policy(path: Path | None = None) -> AdmissionPolicy:
    """The image rules from ``path``, else from the file named by ``FLEETWRIGHT_ADMISSION_FILE``; no
    rules when neither is given. A bad file stops the webhook rather than silently admitting."""
    source = path or (Path(os.environ[ADMISSION_ENV]) if os.environ.get(ADMISSION_ENV) else None)
    if source is None:
        return AdmissionPolicy()
    try:
        return AdmissionPolicy.model_validate_json(source.read_text())
    except OSError as error:
        raise AdmissionPolicyError(f"admission policy {source}: {error}") from error
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors()
        )
        raise AdmissionPolicyError(f"admission policy {source}: {problems}") from error


class ResourceLookup(Protocol):
    """Facts about the cluster the validator needs, supplied by the caller."""

    def policy_names(self) -> Collection[str]:
        """Names of the existing DeploymentPolicies."""
        ...

    def profiles_referencing(self, policy: str) -> Collection[str]:
        """Names of the NodeProfiles whose spec.deploymentPolicyRef.name is ``policy``."""
        ...

    def profile_objects(self) -> list[dict[str, Any]]:
        """Every NodeProfile, as the API returns it."""
        ...

    def policy_registries(self) -> Mapping[str, Collection[str]]:
        """policy name -> its spec.allowedRegistries, for the DeploymentPolicies that set them."""
        ...


def _ref_names(obj: Any) -> list[str]:
    return [name for _, name in policy_refs(obj)]


def object_metadata(obj: Any) -> dict[str, Any]:
    """The ``metadata`` of an object of a review, empty when it has none."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _is_deleting(obj: Any) -> bool:
    return bool(object_metadata(obj).get("deletionTimestamp"))


def evaluate(
    request: dict[str, Any], lookup: ResourceLookup, admission: AdmissionPolicy | None = None
) -> Result:
    """Validate one AdmissionRequest. Unknown resources and operations are allowed untouched."""
    resource_info = request.get("resource")
    resource = resource_info.get("resource") if isinstance(resource_info, dict) else None
    operation = request.get("operation")
    obj = request.get("object")
    old = request.get("oldObject")
    if resource == POLICY_PLURAL:
        if operation == "DELETE":
            name = str(request.get("name") or object_metadata(old).get("name") or "")
            return validate_policy_deletion(name, lookup.profiles_referencing(name))
        if operation in {"CREATE", "UPDATE"} and not _is_deleting(obj):
            return validate_deploymentpolicy(obj, profiles=_profiles_using(obj, lookup))
    if (
        resource in {PROFILE_PLURAL, CAMPAIGN_PLURAL}
        and operation in {"CREATE", "UPDATE"}
        and not _is_deleting(obj)
    ):
        # On UPDATE the references are re-checked only when they changed, so an unrelated edit
        # never wedges on a policy that vanished some other way; the images are checked against
        # the policies' allowedRegistries (and the operator's rules) on every write. A Campaign's
        # profile gets every check a NodeProfile gets.
        refs = _ref_names(obj)
        check_refs = bool(refs) and (operation == "CREATE" or refs != _ref_names(old))
        validate = validate_nodeprofile if resource == PROFILE_PLURAL else validate_campaign
        return validate(
            obj,
            policies=lookup.policy_names() if check_refs else None,
            admission=admission,
            registries=lookup.policy_registries() if refs else None,
        )
    return Result()


def _profiles_using(policy: Any, lookup: ResourceLookup) -> list[dict[str, Any]] | None:
    """The NodeProfiles referencing ``policy`` when it sets allowedRegistries (None otherwise: no
    lookup for a policy that restricts nothing)."""
    spec = policy.get("spec") if isinstance(policy, dict) else None
    if not isinstance(spec, dict) or spec.get("allowedRegistries") is None:
        return None
    name = object_metadata(policy).get("name")
    return [p for p in lookup.profile_objects() if name in _ref_names(p)]


def _kind_and_name(request: dict[str, Any]) -> tuple[str, str]:
    kind_info = request.get("kind")
    kind = str((kind_info.get("kind") if isinstance(kind_info, dict) else None) or "object")
    name = str(request.get("name") or object_metadata(request.get("object")).get("name") or "")
    return kind, name


def _cause(issue: Issue) -> dict[str, str]:
    return {"field": issue.path, "message": issue.message, "reason": "FieldValueInvalid"}


def response_for(request: dict[str, Any], result: Result) -> dict[str, Any]:
    """The AdmissionResponse for ``result``: every error with its field path in the message."""
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": result.ok}
    if result.warnings:
        response["warnings"] = [str(w)[:_MAX_WARNING] for w in result.warnings]
    if not result.ok:
        kind, name = _kind_and_name(request)
        details = "; ".join(f"{e}" for e in result.errors)
        verb = "cannot be deleted" if request.get("operation") == "DELETE" else "is invalid"
        response["status"] = {
            "code": 403 if request.get("operation") == "DELETE" else 422,
            "reason": "Forbidden" if request.get("operation") == "DELETE" else "Invalid",
            "message": f'{kind} "{name}" {verb}: {details}',
            "details": {
                "name": name,
                "group": GROUP,
                "kind": kind,
                "causes": [_cause(e) for e in result.errors],
            },
        }
    return response


def review(body: Any, lookup: ResourceLookup, admission: AdmissionPolicy | None = None) -> dict[str, Any]:
    """AdmissionReview in, AdmissionReview out. Never raises: a lookup failure denies the request
    with the reason (failurePolicy Fail semantics, but with a readable message)."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        request = {}
        result = Result()
        result.error("", "malformed AdmissionReview: no request", "admission-malformed")
    else:
        try:
            result = evaluate(request, lookup, admission)
        except Exception as exc:  # a failed lookup must produce an answer, not a 500
            log.warning("admission lookup failed: %s", exc)
            result = Result()
            result.error(
                "", f"cannot validate now (cluster lookup failed: {exc}); retry", "admission-lookup-failed"
            )
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response_for(request, result),
    }


# ---------------------------------------------------------------------------------------------
# Node CREATE: the runtime-required taint at admission
