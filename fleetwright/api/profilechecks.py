"""The NodeProfile checks CEL cannot do, on a parsed spec: semver versions, image references,
``dependsOn`` targets, versions and cycles, ``configInterrupts`` globs, resource quantities, the
shellscript package's check keys, uninstalls with dependents, the referenced policy, and the
operator's image rules (``AdmissionPolicy``).

Each check adds what it finds to the ``Result`` it is given (``fleetwright.api.validation`` runs
them). Never raises on a parsed spec and never does I/O.
"""

from __future__ import annotations

import fnmatch
import graphlib
import re
from collections.abc import Collection
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

import semver

from fleetwright.api.nodeprofile import NodeProfileSpec, Package

if TYPE_CHECKING:
    from fleetwright.api.validation import AdmissionPolicy, Result


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
    result.check_unique([p.name for p in spec.packages], "spec.packages", "name", "package-name-duplicate")
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
    result.check_unique(
        [t.key + "/" + t.effect for t in spec.additional_tolerations],
        "spec.additionalTolerations",
        "key",
        "toleration-duplicate",
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
