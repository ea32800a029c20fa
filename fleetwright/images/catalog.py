"""The catalog's package images as their own Dockerfiles describe them.

A catalog package (``packages/<name>``) is built by NodeWright's Dockerfile shape: ``FROM busybox``
and COPY lines. This module reads that shape (and nothing more: any other instruction is an error
naming the file) plus the package's name and version from its ``config.json``, so the offline
builder copies exactly what ``docker build`` would. It reads files and never writes.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from fleetwright.images import spec


class CatalogError(ValueError):
    """A package directory the offline builder cannot build; the message names the file."""


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    """Paths relative to the package directory (the build context)."""
    destination: str


@dataclass(frozen=True)
class PackageImage:
    directory: Path
    name: str
    version: str
    copies: tuple[Copy, ...]

    @property
    def ref(self) -> str:
        return spec.package_ref(self.name, self.version)


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    out = []
    for line in dockerfile.read_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def read(directory: Path) -> PackageImage:
    dockerfile = directory / "Dockerfile"
    steps = _instructions(dockerfile)
    if not steps or steps[0][0] != "FROM" or not steps[0][1].startswith(spec.PACKAGE_BASE):
        raise CatalogError(f"{dockerfile}: must start with FROM {spec.PACKAGE_BASE}")
    copies = []
    for keyword, rest in steps[1:]:
        words = shlex.split(rest)
        if keyword != "COPY" or len(words) < 2 or any(w.startswith("--") for w in words):
            raise CatalogError(f"{dockerfile}: only plain COPY lines may follow FROM, got {keyword} {rest}")
        copies.append(Copy(tuple(words[:-1]), words[-1]))
    config = json.loads((directory / "skyhook-package" / "config.json").read_text())
    return PackageImage(directory, config["package_name"], config["package_version"], tuple(copies))


def packages(repo: Path) -> list[PackageImage]:
    """Every catalog package, by directory name."""
    return [read(d) for d in sorted((repo / "packages").iterdir()) if (d / "Dockerfile").is_file()]
