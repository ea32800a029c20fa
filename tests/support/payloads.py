"""Package payloads written by tests (``config.json`` steps, ``skyhook_dir`` scripts) and the
throwaway roots they run in."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fleetwright.packagetest.hostroot import HostRoot, build
from fleetwright.packagetest.runner import StageInvocation


def step(
    path: str, *args: str, codes: tuple[int, ...] = (0,), idempotence: bool = True, **extra: object
) -> dict[str, object]:
    """A ``config.json`` step object with the schema's required fields filled in."""
    doc: dict[str, object] = {
        "name": path.replace("/", "_"),
        "path": path,
        "arguments": list(args),
        "returncodes": list(codes),
        "on_host": True,
        "idempotence": idempotence,
        "upgrade_step": False,
    }
    doc.update(extra)
    return doc


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_package(
    payload: str,
    modes: Mapping[str, list[dict[str, object]]],
    scripts: Mapping[str, str],
    *,
    name: str = "demo",
    version: str = "1.0.0",
    expected_config_files: list[str] | None = None,
    root_dir: Mapping[str, str] | None = None,
) -> str:
    """Write a package payload (``config.json``, ``skyhook_dir/``, ``root_dir/``) under ``payload``."""
    os.makedirs(os.path.join(payload, "skyhook_dir"), exist_ok=True)
    doc = {
        "schema_version": "v1",
        "package_name": name,
        "package_version": version,
        "expected_config_files": expected_config_files or [],
        "modes": dict(modes),
    }
    _write(os.path.join(payload, "config.json"), json.dumps(doc, indent=2))
    for rel, text in scripts.items():
        _write(os.path.join(payload, "skyhook_dir", rel), text)
    for rel, text in (root_dir or {}).items():
        _write(os.path.join(payload, "root_dir", rel.lstrip("/")), text)
    return payload


def codes(runs: Sequence[StageInvocation]) -> list[int]:
    """The agent's exit status of each invocation of a ``run_stages`` result."""
    return [r.result.returncode for r in runs]


def needs_root() -> None:
    """Fail the test unless it runs as root: chroots need it (CI runs as root; never a skip)."""
    if os.geteuid() != 0:
        pytest.fail("chroot tests must run as root")


def chroot_root(tmp_path: Path, flavour: str = "debian", **options: Any) -> HostRoot:
    """A throwaway root of ``flavour`` under ``tmp_path`` (``options`` go to ``hostroot.build``);
    running packages in it needs root."""
    needs_root()
    return build(str(tmp_path / flavour), flavour=flavour, **options)
