"""NodeProfile manifests as a user writes them (camelCase dicts, before any parsing), for the tests
of parsing, validation and admission: a profile on the ``pool: gpu`` nodes and its packages."""

from __future__ import annotations

from typing import Any

from fleetwright.api.common import API_VERSION


def package_manifest(name: str, version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
    """A package entry with an image named after it; ``extra`` adds or overrides fields."""
    return {"name": name, "version": version, "image": f"ghcr.io/example/{name}", **extra}


def profile_manifest(*packages: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """NodeProfile ``p`` on the ``pool: gpu`` nodes with ``packages`` (the ``tuning`` package when
    none is given); ``spec`` adds or overrides spec fields."""
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeProfile",
        "metadata": {"name": "p"},
        "spec": {
            "nodeSelector": {"matchLabels": {"pool": "gpu"}},
            "packages": list(packages) or [package_manifest("tuning")],
            **spec,
        },
    }
