"""Leaving the lab out of the controller image: the lab modules ``fleetwright.lab`` names, removed
from the ``fleetwright`` package pip installed under an image's prefix.

Both builders run it after the project's ``pip install --target``: the offline builder in-process,
the Dockerfile's build stage as ``python3 -m fleetwright.images.prune PREFIX``. Owns finding and
removing those files; it must not know how the prefix was built.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from fleetwright import lab


def module_paths(package: Path, dotted: str) -> list[Path]:
    """What module ``dotted`` is under the installed ``package`` directory: its package directory,
    or its ``.py`` file and that file's compiled ``__pycache__`` entries."""
    path = package.joinpath(*dotted.split(".")[1:])
    compiled = sorted((path.parent / "__pycache__").glob(f"{path.name}.*.pyc"))
    found = [path, path.with_name(f"{path.name}.py"), *compiled]
    return [p for p in found if p.exists()]


def prune_lab(prefix: Path) -> list[Path]:
    """Remove every lab module from ``prefix/fleetwright``; the paths removed. A lab module that is
    not there is an error: the list in ``fleetwright.lab`` no longer matches the package."""
    removed: list[Path] = []
    for dotted in lab.MODULES:
        paths = module_paths(prefix / "fleetwright", dotted)
        if not paths:
            raise FileNotFoundError(f"lab module {dotted} is not installed under {prefix}")
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        removed += paths
    return removed


if __name__ == "__main__":
    for gone in prune_lab(Path(sys.argv[1])):
        print(f"removed {gone}")
