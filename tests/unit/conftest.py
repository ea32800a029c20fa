"""Fixtures of the unit tier's chroot tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetwright.packagetest.hostroot import HostRoot
from tests.support.payloads import chroot_root


@pytest.fixture
def host(tmp_path: Path, request: pytest.FixtureRequest) -> HostRoot:
    """A throwaway host root for one test: Debian-like, or as the test's ``host_root`` marker says
    (``flavour`` and ``kernel`` as ``hostroot.build`` takes them, ``directories`` to create on it)."""
    marker = request.node.get_closest_marker("host_root")
    options = dict(marker.kwargs) if marker is not None else {}
    directories = options.pop("directories", ())
    root = chroot_root(tmp_path, **options)
    for directory in directories:
        os.makedirs(root.host(directory))
    return root
