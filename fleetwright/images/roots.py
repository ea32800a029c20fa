"""Real distribution roots for ``fleetwright package test --os debian-real``, built by mmdebstrap.

It owns a real root's recipe and its cache. The recipe: the images' Debian suite and archive
(``spec``), the packages every node has (systemd, udev, kmod, procps), the slim image's dpkg
excludes, the package lists kept (a node's apt installs without ``apt-get update``), and every
fake host tool's path diverted with ``dpkg-divert``, so that a package installed later (systemd's
``systemctl``, procps' ``sysctl``) lands beside the fake instead of replacing it. The result is
one tar under ``<cache>/images``, keyed by the recipe like the images and rebuilt once it is older
than ``MAX_AGE``: the archive drops superseded versions, and old lists would name them.
``fleetwright.packagetest.hostroot.unpack`` makes each test root from it; nothing here runs a
package or touches anything outside the cache and its temporary directories.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fleetwright.images import spec
from fleetwright.images.offline import BUILD_HINT, ImageBuildError, Log, content_key, run_tool
from fleetwright.packagetest import toolbox
from fleetwright.packagetest.flavours import FLAVOURS, Flavour

RECIPE = 1  # bump to rebuild every cached root when the recipe changes in a way argv does not show
# A day: security updates replace packages daily and the archive soon stops serving the old ones.
MAX_AGE = 24 * 3600
# What a Debian GPU node runs besides the minimal base: its init, device manager, module and
# process tools, and the CA bundle for HTTPS repositories.
NODE_DEBS = ("systemd", "systemd-sysv", "udev", "kmod", "procps", "ca-certificates")


@dataclass(frozen=True)
class RealRoot:
    """A real flavour's tar: ``built`` is False when it is not (or no longer) in the cache."""

    flavour: str
    tar: Path
    built: bool


def _diversions(flavour: Flavour) -> str:
    paths = " ".join(shlex.quote(p) for p in toolbox.diverted(flavour))
    return (
        f'chroot "$1" sh -c \'for p in {paths}; do '
        'dpkg-divert --quiet --local --rename --divert "$p.distrib" --add "$p"; done\''
    )


def recipe(flavour: Flavour) -> list[str]:
    """mmdebstrap's arguments for ``flavour``, up to the output (the archive's sources follow)."""
    if not flavour.real:
        raise ImageBuildError(f"{flavour.name} is not a real distribution root")
    return [
        "mmdebstrap",
        "--mode=unshare",
        "--variant=minbase",
        "--format=tar",
        "--skip=cleanup/apt/lists",
        *(f"--dpkgopt=path-exclude={p}" for p in spec.SLIM_EXCLUDES),
        *(f"--dpkgopt=path-include={p}" for p in spec.SLIM_INCLUDES),
        f"--include={','.join(NODE_DEBS)}",
        f"--customize-hook={_diversions(flavour)}",
        spec.DEBIAN_SUITE,
    ]


def locate(cache: Path, flavour: Flavour) -> RealRoot:
    """Where ``flavour``'s root is (or would be) cached, and whether it is there and fresh."""
    key = content_key(RECIPE, recipe(flavour), spec.DEBIAN_SOURCES)
    tar = cache / "images" / f"root-{flavour.name}-{key[:16]}.tar"
    fresh = tar.is_file() and time.time() - tar.stat().st_mtime < MAX_AGE
    return RealRoot(flavour.name, tar, fresh)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder per root at a time (tests and ``package test`` may start together)."""
    with open(path.with_suffix(".lock"), "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build(cache: Path, name: str, log: Log = print) -> Path:
    """The tar of real flavour ``name``: the cached one while fresh, else built now (about a
    minute; the packages come from the Debian archive)."""
    flavour = FLAVOURS[name]
    found = locate(cache, flavour)
    if found.built:
        return found.tar
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError(f"mmdebstrap is not installed: {BUILD_HINT}")
    found.tar.parent.mkdir(parents=True, exist_ok=True)
    with _locked(found.tar):
        if locate(cache, flavour).built:  # another builder finished while this one waited
            return found.tar
        log(f"building the {name} root ({spec.DEBIAN_SUITE} minbase + {' '.join(NODE_DEBS)})")
        with tempfile.TemporaryDirectory(prefix="build-", dir=found.tar.parent) as work:
            out = Path(work) / "root.tar"
            run_tool("mmdebstrap", [*recipe(flavour), str(out), *spec.DEBIAN_SOURCES], log)
            os.replace(out, found.tar)
        log(f"{name} root: {found.tar} ({found.tar.stat().st_size / 1e6:.0f} MB)")
    return found.tar
