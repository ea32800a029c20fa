"""Fixtures of the unit tier's chroot tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.packagetest.hostroot import HostRoot
from tests.support.payloads import chroot_root


@pytest.fixture
def host(tmp_path: Path) -> HostRoot:
    """A throwaway Debian-like host root for one test."""
    return chroot_root(tmp_path)
