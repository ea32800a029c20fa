"""Package payloads written by tests: ``config.json`` steps and ``skyhook_dir`` scripts."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping


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
