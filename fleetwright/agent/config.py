"""Loads and validates a package's ``config.json``: schema v1 plus the loading rules
(docs/package-format.md §5-§6).

It owns the typed view of the manifest (``PackageConfig``/``ScriptStep``) and every structural rule.
It reports every problem at once, each naming its field (``modes.apply[0].returncodes``), and it
never touches the host: callers decide what happens after a successful load.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from fleetwright.agent.modes import ALL_MODES, INTERRUPT, UPGRADE_MODES, WORK_MODES, check_of

SCHEMA_VERSIONS = ("v1",)
# SemVer 2.0 (semver.org's recommended pattern): no leading "v", no leading zeros.
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
STEP_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
REQUIRED_TOP = ("schema_version", "package_name", "package_version", "expected_config_files", "modes")
REQUIRED_STEP = ("name", "path", "arguments", "returncodes", "on_host", "idempotence", "upgrade_step")
# Keys the v6 loader accepts beyond the required ones; anything else crashed it, we reject it.
OPTIONAL_STEP = ("env", "requires_interrupt")


class ConfigError(Exception):
    """``config.json`` is invalid. ``errors`` holds one ``(field path, message)`` per problem."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


@dataclass(frozen=True)
class ScriptStep:
    name: str
    path: str
    arguments: tuple[str, ...]
    returncodes: tuple[int, ...]
    on_host: bool
    idempotence: bool
    upgrade_step: bool
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PackageConfig:
    package_name: str
    package_version: str
    expected_config_files: tuple[str, ...]
    modes: dict[str, tuple[ScriptStep, ...]]
    warnings: tuple[str, ...] = ()

    def steps(self, mode: str) -> tuple[ScriptStep, ...]:
        return self.modes.get(mode, ())


class _Errors:
    """Collects ``(field, message)`` pairs so that every problem is reported in one go."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))


def _type_name(value: object) -> str:
    return {bool: "boolean", int: "integer", str: "string", list: "array", dict: "object"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _is_int(value: object) -> bool:
    # JSON booleans are not integers, although Python's bool subclasses int.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_str_list(value: object, path: str, errs: _Errors) -> tuple[str, ...]:
    if not isinstance(value, list):
        errs.add(path, f"must be an array of strings, got {_type_name(value)}")
        return ()
    for i, item in enumerate(value):
        if not isinstance(item, str):
            errs.add(f"{path}[{i}]", f"must be a string, got {_type_name(item)}")
    return tuple(v for v in value if isinstance(v, str))


def _check_returncodes(value: object, path: str, errs: _Errors) -> tuple[int, ...]:
    if not isinstance(value, list):
        errs.add(path, f"must be an array of integers, got {_type_name(value)}")
        return ()
    if not value:
        errs.add(path, "must list at least one return code")
    for i, item in enumerate(value):
        if not _is_int(item):
            errs.add(f"{path}[{i}]", f"must be an integer, got {_type_name(item)}")
    return tuple(v for v in value if _is_int(v))


def _check_env(value: object, path: str, errs: _Errors) -> dict[str, str]:
    if not isinstance(value, dict):
        errs.add(path, f"must be an object of strings, got {_type_name(value)}")
        return {}
    for key, item in value.items():
        if not isinstance(item, str):
            errs.add(f"{path}.{key}", f"must be a string, got {_type_name(item)}")
    return {k: v for k, v in value.items() if isinstance(v, str)}


def _check_bool(raw: dict[str, Any], key: str, path: str, errs: _Errors) -> bool:
    value = raw.get(key)
    if key in raw and not isinstance(value, bool):
        errs.add(f"{path}.{key}", f"must be a boolean, got {_type_name(value)}")
    return bool(value) if isinstance(value, bool) else False


def _check_step_path(value: object, path: str, errs: _Errors) -> str:
    if not isinstance(value, str) or not value:
        errs.add(path, f"must be a non-empty string, got {_type_name(value)}")
        return ""
    pure = PurePosixPath(value)
    # A path outside skyhook_dir/ would run an arbitrary host binary; refuse it at load time.
    if pure.is_absolute() or ".." in pure.parts:
        errs.add(path, f"must be a relative path inside skyhook_dir/, got {value!r}")
    return value


def _build_step(raw: object, mode: str, path: str, errs: _Errors) -> ScriptStep | None:
    if not isinstance(raw, dict):
        errs.add(path, f"must be an object, got {_type_name(raw)}")
        return None
    for key in REQUIRED_STEP:
        if key not in raw:
            errs.add(f"{path}.{key}", "is required")
    for key in sorted(set(raw) - set(REQUIRED_STEP) - set(OPTIONAL_STEP)):
        errs.add(f"{path}.{key}", "is not a known step field")
    name = raw.get("name", raw.get("path"))
    if "name" in raw and (not isinstance(name, str) or not STEP_NAME.match(name)):
        errs.add(f"{path}.name", "must be letters, digits, '_', '-' or '.' (at least one)")
    step_path = _check_step_path(raw.get("path", ""), f"{path}.path", errs) if "path" in raw else ""
    arguments = _check_str_list(raw.get("arguments", []), f"{path}.arguments", errs)
    returncodes = _check_returncodes(raw.get("returncodes", [0]), f"{path}.returncodes", errs)
    env = _check_env(raw.get("env", {}), f"{path}.env", errs)
    flags = {key: _check_bool(raw, key, path, errs) for key in ("on_host", "idempotence", "upgrade_step")}
    _check_bool(raw, "requires_interrupt", path, errs)
    if flags["upgrade_step"] and mode not in UPGRADE_MODES:
        errs.add(f"{path}.upgrade_step", "is only allowed in the upgrade and upgrade-check modes")
    if flags["upgrade_step"] and arguments:
        errs.add(f"{path}.arguments", "must be empty for an upgrade_step (the agent appends the versions)")
    return ScriptStep(
        name=name if isinstance(name, str) else step_path,
        path=step_path,
        arguments=arguments,
        returncodes=returncodes,
        on_host=flags["on_host"] if "on_host" in raw else True,
        idempotence=flags["idempotence"],
        upgrade_step=flags["upgrade_step"],
        env=env,
    )


def _build_modes(raw: object, errs: _Errors) -> dict[str, tuple[ScriptStep, ...]]:
    if not isinstance(raw, dict):
        errs.add("modes", f"must be an object, got {_type_name(raw)}")
        return {}
    modes: dict[str, tuple[ScriptStep, ...]] = {}
    for mode, steps in raw.items():
        if mode not in ALL_MODES:
            errs.add(f"modes.{mode}", f"is not a known mode (known: {', '.join(ALL_MODES)})")
            continue
        if not isinstance(steps, list):
            errs.add(f"modes.{mode}", f"must be an array of steps, got {_type_name(steps)}")
            continue
        built = [_build_step(s, mode, f"modes.{mode}[{i}]", errs) for i, s in enumerate(steps)]
        modes[mode] = tuple(s for s in built if s is not None)
    return modes


def _check_top(raw: dict[str, Any], errs: _Errors) -> None:
    for key in REQUIRED_TOP:
        if key not in raw:
            errs.add(key, "is required")
    version = raw.get("schema_version")
    if "schema_version" in raw and version not in SCHEMA_VERSIONS:
        known = ", ".join(SCHEMA_VERSIONS)
        errs.add("schema_version", f"unknown schema version {version!r} (known: {known})")
    name = raw.get("package_name")
    if "package_name" in raw and (not isinstance(name, str) or not name or "/" in name):
        errs.add("package_name", "must be a non-empty string without '/'")
    pkg_version = raw.get("package_version")
    if "package_version" in raw and (not isinstance(pkg_version, str) or not SEMVER.match(pkg_version)):
        errs.add("package_version", f"must be a SemVer 2.0 version such as 1.2.3, got {pkg_version!r}")


def _check_structure(raw_modes: object, modes: dict[str, tuple[ScriptStep, ...]], errs: _Errors) -> None:
    if not isinstance(raw_modes, dict):
        return
    if not any(steps for mode, steps in modes.items() if mode != INTERRUPT):
        errs.add("modes", "no defined steps: at least one mode must have a step")
    if not any(mode in raw_modes for mode in WORK_MODES):
        errs.add("modes", f"must contain at least one work mode ({', '.join(WORK_MODES)})")
    for mode in WORK_MODES:
        if modes.get(mode) and not modes.get(check_of(mode)):
            errs.add(f"modes.{check_of(mode)}", f"must have at least one step because {mode} has steps")


def _check_paths_exist(modes: dict[str, tuple[ScriptStep, ...]], skyhook_dir: str, errs: _Errors) -> None:
    for mode, steps in modes.items():
        for i, step in enumerate(steps):
            if step.path and not os.path.isfile(os.path.join(skyhook_dir, step.path)):
                errs.add(f"modes.{mode}[{i}].path", f"{step.path} does not exist under skyhook_dir/")


def _naming_warnings(modes: dict[str, tuple[ScriptStep, ...]]) -> tuple[str, ...]:
    """A naming convention, warned about only (docs/package-format.md §6): a work step ``dir/x.sh``
    is expected to have a check ``dir/x_check.sh``."""
    warnings = []
    for mode in WORK_MODES:
        checks = {s.path for s in modes.get(check_of(mode), ())}
        for step in modes.get(mode, ()):
            stem, ext = os.path.splitext(step.path)
            expected = f"{stem}_check{ext}"
            if expected not in checks:
                warnings.append(f"modes.{mode}: no check step {expected} listed for {step.path}")
    return tuple(warnings)


def _on_host_warnings(modes: dict[str, tuple[ScriptStep, ...]]) -> tuple[str, ...]:
    """``on_host: false`` is accepted and ignored, as NodeWright's production agent does."""
    return tuple(
        f"modes.{mode}[{i}].on_host: false is ignored: every step runs in the host's chroot"
        for mode, steps in modes.items()
        for i, step in enumerate(steps)
        if not step.on_host
    )


def validate(raw: object, skyhook_dir: str | None) -> PackageConfig:
    """Validate a parsed document. ``skyhook_dir`` (when given) is where step paths must exist."""
    errs = _Errors()
    if not isinstance(raw, dict):
        raise ConfigError([("(document)", f"must be a JSON object, got {_type_name(raw)}")])
    _check_top(raw, errs)
    expected = _check_str_list(raw.get("expected_config_files", []), "expected_config_files", errs)
    modes = _build_modes(raw.get("modes", {}), errs)
    _check_structure(raw.get("modes"), modes, errs)
    if skyhook_dir is not None:
        _check_paths_exist(modes, skyhook_dir, errs)
    if errs.items:
        raise ConfigError(errs.items)
    return PackageConfig(
        package_name=raw["package_name"],
        package_version=raw["package_version"],
        expected_config_files=expected,
        modes=modes,
        warnings=_naming_warnings(modes) + _on_host_warnings(modes),
    )


def load(package_dir: str) -> PackageConfig:
    """Load ``<package_dir>/config.json`` and check step paths under ``<package_dir>/skyhook_dir``."""
    path = os.path.join(package_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except FileNotFoundError:
        raise ConfigError([("config.json", f"not found at {path}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([("config.json", f"cannot be read: {exc}")]) from None
    except json.JSONDecodeError as exc:
        raise ConfigError([("config.json", f"is not valid JSON: {exc}")]) from None
    return validate(raw, os.path.join(package_dir, "skyhook_dir"))
