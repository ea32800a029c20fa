"""The releases fleetwright still supports upgrading from: each one's commit in git history and
its frozen workflow histories. Cutting a release adds a line here (CONTRIBUTING.md, "Cutting a
release"); dropping support for one removes its line and its histories together."""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HISTORIES = REPO / "tests" / "workflow" / "histories"

SUPPORTED: dict[str, str] = {
    "0.1.0": "4e1b8fd1f1f537b58519afc49cbd610d5e2e0d11",
}
"""Each supported release and the commit it was cut from (its tag is ``v<release>``)."""


def previous() -> str:
    """The newest supported release: the one an upgrade test starts from."""
    return max(SUPPORTED, key=lambda release: tuple(int(part) for part in release.split(".")))


def histories(release: str) -> list[Path]:
    return sorted((HISTORIES / release).glob("*.json"))


def checkout(release: str, into: Path) -> Path:
    """The release's source tree, from its commit in git history (not a copy in this tree), below
    ``into``; its ``fleetwright`` package imports with this checkout's pinned dependencies."""
    tree = into / f"fleetwright-{release}"
    if (tree / "pyproject.toml").exists():
        return tree
    tree.mkdir(parents=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", SUPPORTED[release]],
            stdout=archive,
            check=True,
        )
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(tree, filter="tar")
    return tree
