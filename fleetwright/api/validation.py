"""The pure validator behind the admission webhook and ``fleetwright validate``.

Takes a decoded manifest (any Python value) plus, where needed, facts about the cluster passed in as
data (existing DeploymentPolicy names, profiles referencing a policy) and returns every problem with
its Kubernetes field path, e.g. ``spec.packages[1].dependsOn[0].version``. It covers the schema and
CEL rules (so offline validation matches the apiserver) and what CEL cannot check: semver,
``dependsOn`` targets and versions, dependency cycles, ``configInterrupts`` globs, image references,
resource quantities, the referenced policy, and deletion of a policy still in use. An optional
``AdmissionPolicy`` (operator settings) adds supply-chain rules: images pinned by digest, and only
from allowed registries.

Never raises on any input and never does I/O.
"""

from __future__ import annotations

import fnmatch
import graphlib
import json
import re
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, TypeVar

import semver
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetwright.api.common import API_VERSION, DNS_LABEL_PATTERN, SKIP_RULES_CONTEXT, ApiModel
from fleetwright.api.deploymentpolicy import DeploymentPolicySpec, DeploymentPolicyStatus, FailurePolicy, Step
from fleetwright.api.nodeprofile import NodeProfileSpec, NodeProfileStatus, Package

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
        # A prefix matches whole path components, so "ghcr.io/acme" never admits "ghcr.io/acmeevil".
        return not self.allowed_registries or any(
            image == entry.rstrip("/") or image.startswith(entry.rstrip("/") + "/")
            for entry in self.allowed_registries
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
    obj: Any, *, policies: Collection[str] | None = None, admission: AdmissionPolicy | None = None
) -> Result:
    """Validate a NodeProfile manifest. ``policies``: names of existing DeploymentPolicies (None: do
    not check the reference); ``admission``: the operator's image rules (None: none)."""
    return _guard(lambda: _validate_nodeprofile(obj, policies, admission))


def _validate_nodeprofile(
    obj: Any, policies: Collection[str] | None, admission: AdmissionPolicy | None = None
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
    return result


def check_image_policy(spec: NodeProfileSpec, admission: AdmissionPolicy, result: Result) -> None:
    """The operator's supply-chain rules on every package image."""
    for i, package in enumerate(spec.packages):
        base = f"spec.packages[{i}]"
        if admission.require_digest and not package.digest:
            result.error(
                f"{base}.digest",
                f"required: the admission policy requires images pinned by digest "
                f"(set digest to the sha256 of {package.image}:{package.version})",
                "image-digest-required",
            )
        if not admission.allows(package.image):
            allowed = ", ".join(admission.allowed_registries)
            result.error(
                f"{base}.image",
                f"{package.image!r} is not from an allowed registry (allowed: {allowed})",
                "image-registry-not-allowed",
            )


def check_profile_spec(
    spec: NodeProfileSpec, result: Result, *, policies: Collection[str] | None = None
) -> None:
    """The checks CEL cannot do, on a parsed NodeProfile spec."""
    _check_unique([p.name for p in spec.packages], "spec.packages", "name", "package-name-duplicate", result)
    by_name = {p.name: p for p in spec.packages}
    for i, package in enumerate(spec.packages):
        base = f"spec.packages[{i}]"
        _check_version(package, base, result)
        _check_image(package.image, f"{base}.image", result)
        _check_dependencies(package, by_name, base, result)
        _check_config_interrupts(package, base, result)
        _check_resources(package, base, result)
        _check_shellscript_keys(package, base, result)
        _check_uninstall_dependents(package, spec.packages, base, result)
    _check_cycles(spec.packages, result)
    _check_unique(
        [t.key + "/" + t.effect for t in spec.additional_tolerations],
        "spec.additionalTolerations",
        "key",
        "toleration-duplicate",
        result,
        severity="warning",
    )
    if spec.deployment_policy_ref is not None and policies is not None:
        name = spec.deployment_policy_ref.name
        if name not in policies:
            result.error(
                "spec.deploymentPolicyRef.name",
                f"DeploymentPolicy {name!r} does not exist (create it first)",
                "policy-ref-missing",
            )


def _check_unique(
    values: list[str],
    path: str,
    key: str,
    rule: str,
    result: Result,
    *,
    severity: Severity = "error",
) -> None:
    counts = Counter(values)
    for i, value in enumerate(values):
        if counts[value] > 1 and values.index(value) != i:
            result.issues.append(Issue(f"{path}[{i}].{key}", f"duplicate value {value!r}", rule, severity))


def _check_version(package: Package, base: str, result: Result) -> None:
    if parse_semver(package.version) is None:
        result.error(
            f"{base}.version",
            f"{package.version!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.2.0)",
            "package-version-semver",
        )


def parse_semver(text: str) -> semver.Version | None:
    """Parse a semantic version (2.0, no leading ``v``); None when invalid."""
    try:
        return semver.Version.parse(text)
    except (ValueError, TypeError):
        return None


# Image references (distribution/reference grammar, without tag or digest).
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_REPOSITORY = re.compile(rf"^{_DOMAIN}(?:/{_PATH_COMPONENT})+$")


def _check_image(image: str, path: str, result: Result) -> None:
    if "@" in image:
        result.error(path, "must not contain a digest: put it in the digest field", "image-no-digest")
        return
    first, _, rest = image.partition("/")
    if ":" in image.rsplit("/", 1)[-1] and rest:
        result.error(path, "must not contain a tag: the version field is the tag", "image-no-tag")
        return
    if not rest or not ("." in first or ":" in first or first == "localhost"):
        result.error(
            path,
            f"{image!r} is not fully qualified: start with a registry host, e.g. ghcr.io/org/{image}",
            "image-fully-qualified",
        )
        return
    if not _REPOSITORY.fullmatch(image):
        result.error(
            path, f"{image!r} is not a valid image repository (lowercase path components)", "image-format"
        )


def _check_dependencies(package: Package, by_name: dict[str, Package], base: str, result: Result) -> None:
    for j, dep in enumerate(package.depends_on):
        path = f"{base}.dependsOn[{j}]"
        target = by_name.get(dep.name)
        if target is None:
            result.error(
                f"{path}.name", f"no package named {dep.name!r} in this profile", "depends-on-unknown"
            )
        elif dep.version != target.version:
            result.error(
                f"{path}.version",
                f"{dep.name} is at version {target.version!r} in this profile, not {dep.version!r}",
                "depends-on-version-mismatch",
            )
        elif dep.name == package.name:
            continue  # reported by the local rule package-no-self-dependency


def _check_cycles(packages: list[Package], result: Result) -> None:
    index = {p.name: i for i, p in enumerate(packages)}
    graph = {p.name: {d.name for d in p.depends_on if d.name in index and d.name != p.name} for p in packages}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle: list[str] = list(exc.args[1])
        first = min(cycle[:-1], key=lambda n: index[n])
        result.error(
            f"spec.packages[{index[first]}].dependsOn",
            "dependency cycle: " + " -> ".join(cycle),
            "depends-on-cycle",
        )


def _check_config_interrupts(package: Package, base: str, result: Result) -> None:
    keys = list(package.config_map)
    seen: set[str] = set()
    for j, entry in enumerate(package.config_interrupts):
        path = f"{base}.configInterrupts[{j}].key"
        if entry.key in seen:
            result.error(path, f"duplicate configInterrupts key {entry.key!r}", "config-interrupt-duplicate")
            continue
        seen.add(entry.key)
        if not any(fnmatch.fnmatchcase(k, entry.key) for k in keys):
            result.error(
                path,
                f"{entry.key!r} matches no key of configMap (keys: {', '.join(sorted(keys)) or 'none'})",
                "config-interrupt-no-match",
            )


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$")
_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(text: str) -> Decimal | None:
    """A Kubernetes resource quantity as a number (None when invalid)."""
    match = _QUANTITY.fullmatch(text)
    if not match:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
        if suffix[:1] in {"e", "E"}:
            return value * Decimal(10) ** int(suffix[1:])
        return value * _SUFFIX[suffix]
    except (InvalidOperation, KeyError, ValueError, OverflowError):
        return None


def _check_resources(package: Package, base: str, result: Result) -> None:
    res = package.resources
    if res is None:
        return
    parsed: dict[str, Decimal] = {}
    for attr, alias in (
        ("cpu_request", "cpuRequest"),
        ("cpu_limit", "cpuLimit"),
        ("memory_request", "memoryRequest"),
        ("memory_limit", "memoryLimit"),
    ):
        text = getattr(res, attr)
        if text is None:
            continue
        value = parse_quantity(text)
        if value is None or value < 0:
            result.error(
                f"{base}.resources.{alias}",
                f"{text!r} is not a valid quantity (e.g. 500m, 1, 256Mi)",
                "resources-quantity",
            )
        else:
            parsed[alias] = value
    for what in ("cpu", "memory"):
        req, lim = parsed.get(f"{what}Request"), parsed.get(f"{what}Limit")
        if req is not None and lim is not None and req > lim:
            result.error(
                f"{base}.resources.{what}Request",
                f"must not exceed {what}Limit",
                "resources-request-exceeds-limit",
            )


# The shellscript package sources <mode>.sh from the configMap and exits 0 when a key is missing, so
# a forgotten check script makes the check pass silently (reference: package-format.md, section 16).
_WORK_KEYS = ("apply.sh", "config.sh", "post_interrupt.sh", "uninstall.sh", "upgrade.sh")


def _check_shellscript_keys(package: Package, base: str, result: Result) -> None:
    for key in _WORK_KEYS:
        check_key = key.removesuffix(".sh") + "_check.sh"
        if key in package.config_map and check_key not in package.config_map:
            result.warn(
                f"{base}.configMap[{key}]",
                f"{key} has no {check_key}: a shellscript-style package would pass its check "
                "without checking",
                "shellscript-missing-check",
            )


def _check_uninstall_dependents(package: Package, packages: list[Package], base: str, result: Result) -> None:
    if not package.uninstall.apply:
        return
    dependents = [p.name for p in packages if any(d.name == package.name for d in p.depends_on)]
    if dependents:
        result.warn(
            f"{base}.uninstall.apply",
            f"{', '.join(dependents)} depend(s) on {package.name}; they will be blocked "
            "(DependencyUninstalled)",
            "uninstall-has-dependents",
        )


# ---------------------------------------------------------------------------------------------
# DeploymentPolicy


def validate_deploymentpolicy(obj: Any) -> Result:
    """Validate a DeploymentPolicy manifest."""
    return _guard(lambda: _validate_deploymentpolicy(obj))


def _validate_deploymentpolicy(obj: Any) -> Result:
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
    return result


def check_policy_spec(spec: DeploymentPolicySpec, result: Result) -> None:
    """Cross-field checks on a parsed DeploymentPolicy spec."""
    _check_unique(
        [c.name for c in spec.compartments], "spec.compartments", "name", "compartment-duplicate", result
    )
    _check_steps_against_budget(spec.steps, spec.max_unavailable, "spec.steps", result)
    for i, comp in enumerate(spec.compartments):
        budget = comp.max_unavailable if comp.max_unavailable is not None else spec.max_unavailable
        _check_steps_against_budget(comp.steps, budget, f"spec.compartments[{i}].steps", result)
    _check_failures_against_budget(spec, result)
    _check_health(spec, result)
    has_batches = any(s.batches is not None for s in spec.effective_steps())
    if spec.failure.failure_threshold is not None and not has_batches:
        result.warn(
            "spec.failure.failureThreshold",
            "has no effect without a batches step",
            "failure-threshold-unused",
        )


def _check_health(spec: DeploymentPolicySpec, result: Result) -> None:
    """Check names are unique, and every gate names a defined check."""
    _check_unique(
        [c.name for c in spec.health_checks], "spec.healthChecks", "name", "health-check-duplicate", result
    )
    known = {c.name for c in spec.health_checks}
    steps = [(f"spec.steps[{i}]", s) for i, s in enumerate(spec.steps)]
    for c, compartment in enumerate(spec.compartments):
        steps += [(f"spec.compartments[{c}].steps[{i}]", s) for i, s in enumerate(compartment.steps)]
    defined = f"spec.healthChecks has: {', '.join(sorted(known)) or 'none'}"
    for path, step in steps:
        for kind, names in (("soak", step.soak), ("batches", step.batches)):
            for i, name in enumerate(names.checks if names is not None else ()):
                if name not in known:
                    where, code = f"{path}.{kind}.checks[{i}]", f"{kind}-unknown-check"
                    result.error(where, f"unknown check {name!r} ({defined})", code)
    if spec.node_gate is None:
        return
    for i, name in enumerate(spec.node_gate.checks):
        if name not in known:
            result.error(
                f"spec.nodeGate.checks[{i}]",
                f"unknown check {name!r} (spec.healthChecks has: {', '.join(sorted(known)) or 'none'})",
                "node-gate-unknown-check",
            )


def _check_steps_against_budget(steps: list[Step], budget: int | str, path: str, result: Result) -> None:
    if not isinstance(budget, int):
        return
    for i, step in enumerate(steps):
        if step.canary is not None and step.canary.count is not None and step.canary.count > budget:
            result.warn(
                f"{path}[{i}].canary.count",
                f"exceeds maxUnavailable ({budget}): the canary runs {budget} node(s) at a time",
                "canary-exceeds-budget",
            )
        if step.batches is not None and step.batches.initial > budget:
            result.warn(
                f"{path}[{i}].batches.initial",
                f"exceeds maxUnavailable ({budget}): batches are capped at {budget}",
                "batch-exceeds-budget",
            )


def _check_failures_against_budget(spec: DeploymentPolicySpec, result: Result) -> None:
    """Warn where a failure rule tolerates as many failed nodes as its budget holds: failed nodes
    stay cordoned and count against maxUnavailable, so they can fill it before the rule fires by
    count. The rollout then fires the rule because no node can start (docs/status.md)."""
    failed, budget = "spec.failure.maxFailedNodes", "spec.maxUnavailable"
    _warn_failures_fill(spec.failure, spec.max_unavailable, (failed, budget), failed, result)
    for i, comp in enumerate(spec.compartments):
        if comp.failure is None and comp.max_unavailable is None:
            continue  # the policy's own rule and cap: warned above
        base = f"spec.compartments[{i}]"
        own_failed = f"{base}.failure.maxFailedNodes" if comp.failure is not None else failed
        own_budget = f"{base}.maxUnavailable" if comp.max_unavailable is not None else budget
        _warn_failures_fill(
            comp.failure if comp.failure is not None else spec.failure,
            comp.max_unavailable if comp.max_unavailable is not None else spec.max_unavailable,
            (own_failed, own_budget),
            own_failed if comp.failure is not None else own_budget,  # on the compartment's own field
            result,
        )


def _warn_failures_fill(
    failure: FailurePolicy, budget: int | str, paths: tuple[str, str], at: str, result: Result
) -> None:
    """``paths``: where ``failure.maxFailedNodes`` and ``budget`` are set; the warning is on ``at``."""
    tolerated = failure.max_failed_nodes
    where = ""
    if isinstance(budget, int):
        if tolerated < budget:
            return
    else:
        percent = int(budget.rstrip("%"))
        if tolerated == 0 or not 0 < percent < 100:
            return  # 0% is an error of its own
        # The cap is max(1, nodes * percent // 100): at most ``tolerated`` below this many nodes.
        fewest = -(-(tolerated + 1) * 100 // percent)
        where = f" on fewer than {fewest} nodes"
    if at == paths[0]:
        when = f"{tolerated} >= {paths[1]} ({budget}){where}"
    else:
        when = f"{budget}{where} <= {paths[0]} ({tolerated})"
    result.warn(
        at,
        f"{when}: failed nodes stay cordoned and can fill the budget before the rule fires by count; "
        f"then {failure.action} fires as no node can start",
        "failures-fill-budget",
    )


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
# Dispatch


def validate_object(obj: Any, *, policies: Collection[str] | None = None) -> Result:
    """Validate any fleetwright manifest, dispatching on ``kind``."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == "NodeProfile":
        return validate_nodeprofile(obj, policies=policies)
    if kind == "DeploymentPolicy":
        return validate_deploymentpolicy(obj)
    result = Result()
    result.error("kind", f"unknown kind {kind!r}: expected NodeProfile or DeploymentPolicy", "envelope-kind")
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
