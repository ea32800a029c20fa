"""The catalog's package images as their own Dockerfiles describe them, and their layers assembled.

A catalog package (``packages/<name>``) is built by NodeWright's Dockerfile shape: ``FROM busybox``
and COPY lines. A layered package starts ``FROM`` another package's image instead (NodeWright's
``nvidia-tuned`` on ``tuned``): its base is that package's directory (the sibling directory named
like the image, or one given) or its image archive. This module reads that shape (and nothing
more: any other instruction is an error naming the file) plus the package's name and version from
its ``config.json``, and assembles a package's files as its image holds them: the base's files,
then its own COPYs over them. The offline builder copies exactly what ``docker build`` would, and
``package test`` runs what the image holds. It writes only where it is asked to assemble.
"""

from __future__ import annotations

import gzip
import io
import json
import shlex
import shutil
import tarfile
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
    base: Path | None = None
    """What its ``FROM`` names when that is another package: a package directory or an image
    archive (an OCI layout in a tar); None for ``FROM busybox``."""

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


def read(directory: Path, base: Path | None = None) -> PackageImage:
    """The package image ``directory``'s Dockerfile builds. ``base``: where the image its ``FROM``
    names is (a package directory or an image archive) when that is not busybox; by default the
    sibling directory named like that image, holding the version its tag names."""
    dockerfile = directory / "Dockerfile"
    steps = _instructions(dockerfile)
    if not steps or steps[0][0] != "FROM":
        raise CatalogError(f"{dockerfile}: must start with FROM {spec.PACKAGE_BASE} or a package's image")
    source = steps[0][1]
    if source.startswith(spec.PACKAGE_BASE):
        base = None
    elif base is None:
        base = _sibling(directory, source, dockerfile)
    copies = []
    for keyword, rest in steps[1:]:
        words = shlex.split(rest)
        if keyword != "COPY" or len(words) < 2 or any(w.startswith("--") for w in words):
            raise CatalogError(f"{dockerfile}: only plain COPY lines may follow FROM, got {keyword} {rest}")
        copies.append(Copy(tuple(words[:-1]), words[-1]))
    path = directory / "skyhook-package" / "config.json"
    if not path.is_file():
        raise CatalogError(f"{path}: missing (a package image's name and version are read from it)")
    config = json.loads(path.read_text())
    return PackageImage(directory, config["package_name"], config["package_version"], tuple(copies), base)


def layered(directory: Path) -> bool:
    """Whether ``directory`` has a Dockerfile whose ``FROM`` is another package's image."""
    dockerfile = directory / "Dockerfile"
    if not dockerfile.is_file():
        return False
    steps = _instructions(dockerfile)
    return bool(steps) and steps[0][0] == "FROM" and not steps[0][1].startswith(spec.PACKAGE_BASE)


def _sibling(directory: Path, image: str, dockerfile: Path) -> Path:
    """The catalog directory beside ``directory`` that builds ``image`` (``.../tuned:1.0.0`` →
    ``../tuned`` with package_version 1.0.0)."""
    name, _, tag = image.rsplit("/", 1)[-1].split("@", maxsplit=1)[0].partition(":")
    sibling = directory.parent / name
    config = sibling / "skyhook-package" / "config.json"
    if sibling.resolve() != directory.resolve() and (sibling / "Dockerfile").is_file() and config.is_file():
        version = json.loads(config.read_text()).get("package_version")
        if not tag or tag == version:
            return sibling
    raise CatalogError(
        f"{dockerfile}: FROM {image}: no sibling package directory {sibling} at version {tag or 'any'}; "
        "give the base package's directory or image archive"
    )


def assemble(package: PackageImage, into: Path) -> Path:
    """Lay out ``package``'s files as its image holds them under ``into`` (its base's first, then
    its own COPYs over them) and return the payload, ``into/skyhook-package``."""
    if package.base is not None and package.base.is_dir():
        assemble(read(package.base), into)
    elif package.base is not None:
        unpack_archive(package.base, into)
    for copy in package.copies:
        copy_into(package.directory, copy, into)
    return into / "skyhook-package"


def layer_chain(package: PackageImage) -> list[PackageImage]:
    """The package directories its image is built from, bottom up (``package`` last)."""
    below = layer_chain(read(package.base)) if package.base is not None and package.base.is_dir() else []
    return [*below, package]


def copy_into(context: Path, copy: Copy, stage: Path) -> None:
    """Docker's COPY: a directory's contents go into the destination; a file goes to the
    destination itself, or into it when it ends with '/'."""
    destination = stage / copy.destination.lstrip("/")
    for source in copy.sources:
        path = context / source
        if path.is_dir():
            shutil.copytree(path, destination, dirs_exist_ok=True, symlinks=True)
        elif copy.destination.endswith("/") or len(copy.sources) > 1:
            destination.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination / path.name)
        else:
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)


def archive_layers(archive: Path) -> list[bytes]:
    """The layer tars of the one image in an OCI image archive, bottom up (decompressed)."""
    try:
        with tarfile.open(archive) as outer:

            def blob(digest: str) -> bytes:
                handle = outer.extractfile("blobs/sha256/" + digest.split(":", 1)[1])
                if handle is None:
                    raise KeyError(digest)
                return handle.read()

            index = json.loads(outer.extractfile("index.json").read())  # type: ignore[union-attr]
            manifest = json.loads(blob(index["manifests"][0]["digest"]))
            layers = [blob(layer["digest"]) for layer in manifest["layers"]]
    except (OSError, KeyError, IndexError, AttributeError, tarfile.TarError, ValueError) as exc:
        raise CatalogError(f"{archive}: not an OCI image archive with one image ({exc})") from None
    return [_decompressed(layer) for layer in layers]


def _decompressed(layer: bytes) -> bytes:
    """A layer blob as a plain tar (registries and builders gzip them)."""
    return gzip.decompress(layer) if layer[:2] == b"\x1f\x8b" else layer


def unpack_archive(archive: Path, into: Path) -> None:
    """Apply an image archive's layers to ``into`` as a runtime would, whiteouts included; the
    ``data`` filter refuses members that would land outside ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    for layer in archive_layers(archive):
        with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
            members = []
            for member in tar.getmembers():
                parent, _, name = member.name.rpartition("/")
                if name == ".wh..wh..opq":  # an opaque directory: the layers below are hidden
                    for gone in (into / parent).iterdir() if (into / parent).is_dir() else ():
                        _remove(gone)
                elif name.startswith(".wh."):
                    _remove(into / parent / name.removeprefix(".wh."))
                else:
                    members.append(member)
            tar.extractall(into, members=members, filter="data")


def packages(repo: Path) -> list[PackageImage]:
    """Every catalog package, by directory name."""
    return [read(d) for d in sorted((repo / "packages").iterdir()) if (d / "Dockerfile").is_file()]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
