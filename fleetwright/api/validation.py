"""The pure validator behind the admission webhook and ``fleetwright validate``.

Takes a decoded manifest (any Python value) plus, where needed, facts about the cluster passed in as
data (existing DeploymentPolicy names, profiles referencing a policy) and returns every problem with
its Kubernetes field path, e.g. ``spec.packages[1].dependsOn[0].version``. It covers the schema and
CEL rules (so offline validation matches the apiserver) and what CEL cannot check: semver,
``dependsOn`` targets and versions, dependency cycles, ``configInterrupts`` globs, image references,
resource quantities, the referenced policy, and deletion of a policy still in use. An optional
``AdmissionPolicy`` (operator settings) adds supply-chain rules: images pinned by digest, and only
from allowed registries.

Owns the issues found, the supply-chain rules, parsing a manifest into its model and the entry
points; the checks on a parsed spec are in ``fleetwright.api.profilechecks``,
``policychecks`` and ``campaignchecks``. Never raises on any input and never does I/O.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetwright.api.campaign import MAX_CAMPAIGN_NAME, CampaignSpec, CampaignStatus
from fleetwright.api.campaignchecks import check_campaign_spec
from fleetwright.api.common import API_VERSION, DNS_LABEL_PATTERN, SKIP_RULES_CONTEXT, ApiModel
from fleetwright.api.deploymentpolicy import DeploymentPolicySpec, DeploymentPolicyStatus
from fleetwright.api.nodeprofile import NodeProfileSpec, NodeProfileStatus
from fleetwright.api.policychecks import check_policy_spec
from fleetwright.api.profilechecks import check_image_policy, check_profile_spec

Severity = Literal["error", "warning"]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Issue:
    """One problem: where (a Kubernetes field path), what, and which rule found it."""

    path: str
    message: str
    rule: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


@dataclass
class Result:
    """Everything found in one object. ``ok`` when there is no error (warnings allowed)."""

    issues: list[Issue] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, path: str, message: str, rule: str) -> None:
        self.issues.append(Issue(path, message, rule))

    def warn(self, path: str, message: str, rule: str) -> None:
        self.issues.append(Issue(path, message, rule, "warning"))

    def check_unique(
        self, values: list[str], path: str, key: str, rule: str, *, severity: Severity = "error"
    ) -> None:
        """A duplicate of ``values`` (the ``key`` of each item of the list at ``path``), at every
        repetition after the first."""
        counts = Counter(values)
        for i, value in enumerate(values):
            if counts[value] > 1 and values.index(value) != i:
                self.issues.append(Issue(f"{path}[{i}].{key}", f"duplicate value {value!r}", rule, severity))


class AdmissionPolicy(BaseModel):
    """Operator-chosen supply-chain rules for package images, enforced at admission. The defaults
    enforce nothing beyond the API's own checks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    require_digest: bool = Field(
        default=False,
        description="Reject packages without spec.packages[].digest: nodes then run exactly the "
        "reviewed image, never whatever a mutable tag points to.",
    )
    allowed_registries: tuple[str, ...] = Field(
        default=(),
        description="Registries (host[:port]) or repository prefixes (host/org) package images must "
        "come from; empty allows any.",
    )

    def allows(self, image: str) -> bool:
        return allows_registry(self.allowed_registries, image)


def allows_registry(allowed: Collection[str], image: str) -> bool:
    """Whether ``image`` comes from one of ``allowed`` (registries ``host[:port]`` or repository
    prefixes ``host/org``; empty allows any): the one matching of the cluster-wide
    ``admission.allowed_registries`` and a DeploymentPolicy's ``allowedRegistries``."""
    # A prefix matches whole path components, so "ghcr.io/acme" never admits "ghcr.io/acmeevil".
    return not allowed or any(
        image == entry.rstrip("/") or image.startswith(entry.rstrip("/") + "/") for entry in allowed
    )


def check_policy_registries(
    spec: NodeProfileSpec, policy: str, allowed: Collection[str], result: Result
) -> None:
    """Every package image of a profile comes from its DeploymentPolicy's ``allowedRegistries``."""
    for i, package in enumerate(spec.packages):
        if not allows_registry(allowed, package.image):
            result.error(
                f"spec.packages[{i}].image",
                f"{package.image!r} is not from a registry DeploymentPolicy {policy!r} allows "
                f"(its spec.allowedRegistries: {', '.join(allowed)})",
                "image-registry-not-allowed-by-policy",
            )


def check_registries_of_profiles(
    spec: DeploymentPolicySpec, profiles: Collection[Mapping[str, Any]], result: Result
) -> None:
    """A policy's ``allowedRegistries`` admits every package image of the profiles using it."""
    if spec.allowed_registries is None:
        return
    allowed = spec.allowed_registries
    for profile in profiles:
        name = (profile.get("metadata") or {}).get("name", "?")
        packages = (profile.get("spec") or {}).get("packages") or []
        for i, package in enumerate(packages):
            image = package.get("image", "") if isinstance(package, dict) else ""
            if not allows_registry(allowed, image):
                result.error(
                    "spec.allowedRegistries",
                    f"excludes {image!r} (spec.packages[{i}].image of NodeProfile {name!r}; "
                    f"allowed: {', '.join(allowed)})",
                    "policy-registries-exclude-profile",
                )


# ---------------------------------------------------------------------------------------------
# Paths and pydantic errors


def format_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """``('spec', 'packages', 1, 'version')`` -> ``spec.packages[1].version``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue  # pydantic marks a bad map key; the key itself is the previous segment
        elif out and not _is_identifier(str(part)):
            # Map keys in brackets (Kubernetes style); quoted when they contain brackets or quotes.
            out += f"[{part}]" if re.fullmatch(r'[^\[\]"]*', str(part)) else f"[{json.dumps(str(part))}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _is_identifier(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text))


_PYDANTIC_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
}


def _pydantic_issues(exc: ValidationError, prefix: tuple[Any, ...]) -> Iterator[Issue]:
    for err in exc.errors(include_url=False):
        loc = prefix + tuple(err["loc"])
        message = _PYDANTIC_MESSAGES.get(err["type"], err["msg"])
        message = message.removeprefix("Value error, ")
        yield Issue(format_path(loc), message, f"schema-{err['type'].replace('_', '-')}")


def _rule_issues(node: Any, path: str) -> Iterator[Issue]:
    """Walk a parsed model tree and report every broken local rule at its exact path."""
    if isinstance(node, ApiModel):
        for rule in node.broken_rules():
            yield Issue(path + rule.field_path, rule.message, rule.name)
        for name, info in type(node).model_fields.items():
            alias = info.alias or name
            yield from _rule_issues(getattr(node, name), f"{path}.{alias}" if path else alias)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _rule_issues(item, f"{path}[{i}]")


def _parse(model: type[M], data: Any, prefix: tuple[Any, ...], result: Result) -> M | None:
    try:
        return model.model_validate(data, context={SKIP_RULES_CONTEXT: True})
    except ValidationError as exc:
        result.issues.extend(_pydantic_issues(exc, prefix))
        return None


# ---------------------------------------------------------------------------------------------
# Envelope (apiVersion, kind, metadata)


def _check_envelope(obj: dict[str, Any], kind: str, result: Result) -> None:
    if obj.get("apiVersion") != API_VERSION:
        result.error("apiVersion", f"must be {API_VERSION}", "envelope-api-version")
    if obj.get("kind") != kind:
        result.error("kind", f"must be {kind}", "envelope-kind")
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        result.error("metadata", "required object is missing", "envelope-metadata")
        return
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        if not metadata.get("generateName"):
            result.error("metadata.name", "required field is missing", "metadata-name-required")
        return
    if len(name) > 63 or not re.fullmatch(DNS_LABEL_PATTERN, name):
        result.error(
            "metadata.name",
            "must be a DNS label (at most 63 characters: lowercase letters, digits, '-'), because "
            "fleetwright uses it in node labels and workflow ids",
            "metadata-name-dns-label",
        )


# ---------------------------------------------------------------------------------------------
# NodeProfile


def validate_nodeprofile(
    obj: Any,
    *,
    policies: Collection[str] | None = None,
    admission: AdmissionPolicy | None = None,
    registries: Mapping[str, Collection[str]] | None = None,
) -> Result:
    """Validate a NodeProfile manifest. ``policies``: names of existing DeploymentPolicies (None: do
    not check the reference); ``admission``: the operator's image rules (None: none);
    ``registries``: policy name -> its ``allowedRegistries``, for the policies that set them."""
    return _guard(lambda: _validate_nodeprofile(obj, policies, admission, registries))


def _validate_nodeprofile(
    obj: Any,
    policies: Collection[str] | None,
    admission: AdmissionPolicy | None = None,
    registries: Mapping[str, Collection[str]] | None = None,
) -> Result:
    result = Result()
    if not isinstance(obj, dict):
        result.error("", "a NodeProfile must be a mapping", "envelope-not-object")
        return result
    _check_envelope(obj, "NodeProfile", result)
    if "spec" not in obj:
        result.error("spec", "required field is missing", "schema-missing")
        return result
    spec = _parse(NodeProfileSpec, obj["spec"], ("spec",), result)
    if obj.get("status") is not None:
        _parse(NodeProfileStatus, obj["status"], ("status",), result)
    if spec is None:
        return result
    result.issues.extend(_rule_issues(spec, "spec"))
    check_profile_spec(spec, result, policies=policies)
    if admission is not None:
        check_image_policy(spec, admission, result)
    ref = spec.deployment_policy_ref.name if spec.deployment_policy_ref is not None else None
    if registries is not None and ref is not None and ref in registries:
        check_policy_registries(spec, ref, registries[ref], result)
    return result


# ---------------------------------------------------------------------------------------------
# DeploymentPolicy


def validate_deploymentpolicy(obj: Any, *, profiles: Collection[Mapping[str, Any]] | None = None) -> Result:
    """Validate a DeploymentPolicy manifest. ``profiles``: the NodeProfiles that reference it (None:
    not known), whose images its ``allowedRegistries`` must admit."""
    return _guard(lambda: _validate_deploymentpolicy(obj, profiles))


def _validate_deploymentpolicy(obj: Any, profiles: Collection[Mapping[str, Any]] | None = None) -> Result:
    result = Result()
    if not isinstance(obj, dict):
        result.error("", "a DeploymentPolicy must be a mapping", "envelope-not-object")
        return result
    _check_envelope(obj, "DeploymentPolicy", result)
    if obj.get("status") is not None:
        _parse(DeploymentPolicyStatus, obj["status"], ("status",), result)
    spec = _parse(DeploymentPolicySpec, obj.get("spec", {}), ("spec",), result)
    if spec is None:
        return result
    result.issues.extend(_rule_issues(spec, "spec"))
    check_policy_spec(spec, result)
    if profiles is not None:
        check_registries_of_profiles(spec, profiles, result)
    return result


def validate_policy_deletion(name: str, referencing_profiles: Collection[str]) -> Result:
    """Deleting a DeploymentPolicy is refused while NodeProfiles reference it."""
    result = Result()
    if referencing_profiles:
        names = ", ".join(sorted(referencing_profiles))
        result.error(
            "metadata.name",
            f"DeploymentPolicy {name!r} is still referenced by NodeProfile(s) {names} "
            "(spec.deploymentPolicyRef.name); change or delete them first",
            "policy-delete-in-use",
        )
    return result


# ---------------------------------------------------------------------------------------------
# Campaign


def validate_campaign(
    obj: Any,
    *,
    policies: Collection[str] | None = None,
    admission: AdmissionPolicy | None = None,
    registries: Mapping[str, Collection[str]] | None = None,
) -> Result:
    """Validate a Campaign manifest: its envelope, its schema and rules (the profile it carries
    included, as the CRD's CEL does), and on that profile every check a NodeProfile gets (its
    paths under ``spec.profile``), with the DeploymentPolicies the campaign and its stages name
    (``policies``, ``registries``: as ``validate_nodeprofile``'s)."""
    return _guard(lambda: _validate_campaign(obj, policies, admission, registries))


def _validate_campaign(
    obj: Any,
    policies: Collection[str] | None,
    admission: AdmissionPolicy | None,
    registries: Mapping[str, Collection[str]] | None,
) -> Result:
    result = Result()
    if not isinstance(obj, dict):
        result.error("", "a Campaign must be a mapping", "envelope-not-object")
        return result
    _check_envelope(obj, "Campaign", result)
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if isinstance(name, str) and len(name) > MAX_CAMPAIGN_NAME:
        result.error(
            "metadata.name",
            f"at most {MAX_CAMPAIGN_NAME} characters: each member's rollout is named <campaign>-<cluster>",
            "metadata-name-dns-label",
        )
    if obj.get("status") is not None:
        _parse(CampaignStatus, obj["status"], ("status",), result)
    if "spec" not in obj:
        result.error("spec", "required field is missing", "schema-missing")
        return result
    spec = _parse(CampaignSpec, obj["spec"], ("spec",), result)
    if spec is None:
        return result
    result.issues.extend(_rule_issues(spec, "spec"))
    check_campaign_spec(spec, result)
    profile = Result()
    check_profile_spec(spec.profile, profile)
    if admission is not None:
        check_image_policy(spec.profile, admission, profile)
    for path, name in policy_refs(obj):
        if policies is not None and name not in policies:
            result.error(
                path,
                f"DeploymentPolicy {name!r} does not exist (create it first)",
                "policy-ref-missing",
            )
        if registries is not None and name in registries:
            check_policy_registries(spec.profile, name, registries[name], profile)
    result.issues.extend(
        replace(i, path="spec.profile" + i.path.removeprefix("spec")) for i in profile.issues
    )
    return result


def policy_refs(obj: Any) -> list[tuple[str, str]]:
    """(field path, name) of every DeploymentPolicy a raw NodeProfile or Campaign object names
    (its ``deploymentPolicyRef``; a Campaign's ``policy`` and its stages'), as far as the object
    can be read: for the lookups that come before (or without) parsing."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not isinstance(spec, dict):
        return []
    stages = spec.get("stages")
    if not isinstance(stages, list):
        stages = []
    holders = [
        ("spec.deploymentPolicyRef", spec.get("deploymentPolicyRef")),
        ("spec.policy", spec.get("policy")),
        *((f"spec.stages[{i}].policy", s.get("policy")) for i, s in enumerate(stages) if isinstance(s, dict)),
    ]
    return [
        (f"{path}.name", ref["name"])
        for path, ref in holders
        if isinstance(ref, dict) and isinstance(ref.get("name"), str)
    ]


# ---------------------------------------------------------------------------------------------
# Dispatch


def validate_object(
    obj: Any,
    *,
    policies: Collection[str] | None = None,
    registries: Mapping[str, Collection[str]] | None = None,
) -> Result:
    """Validate any fleetwright manifest, dispatching on ``kind`` (``registries``: as
    ``validate_nodeprofile``'s)."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == "NodeProfile":
        return validate_nodeprofile(obj, policies=policies, registries=registries)
    if kind == "DeploymentPolicy":
        return validate_deploymentpolicy(obj)
    if kind == "Campaign":
        return validate_campaign(obj, policies=policies, registries=registries)
    result = Result()
    result.error(
        "kind", f"unknown kind {kind!r}: expected NodeProfile, DeploymentPolicy or Campaign", "envelope-kind"
    )
    return result


def _guard(run: Any) -> Result:
    """Last line of defence: a bug in a check becomes an error naming the bug, never an exception
    (the property test asserts that this path is never taken)."""
    try:
        result: Result = run()
    except Exception as exc:  # must never raise into the webhook or the CLI
        result = Result()
        result.error("", f"internal validation error: {type(exc).__name__}: {exc}", "internal-error")
    return result
