"""Catalog package ``bind-mount`` in a chroot (needs root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetwright.cli.package import lint
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import codes

pytestmark = [pytest.mark.unit, pytest.mark.host_root(directories=("/data/nvme", "/data/models"))]

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "bind-mount")
MOUNTS = {"mounts": "# scratch for jobs\n/data/nvme /var/lib/scratch\n/data/models /opt/models\n"}


def test_lints_clean() -> None:
    report = lint(PACKAGE)
    assert report.errors == []


def test_config_mounts_now_and_persists_in_fstab(host: HostRoot) -> None:
    runs = run_stages(host, PACKAGE, ["config"], configmaps=MOUNTS)
    assert codes(runs) == [0, 0], runs[-1].result.output
    fstab = host.read("/etc/fstab")
    assert "/data/nvme /var/lib/scratch none bind,nofail 0 0 # fleetwright:bind-mount" in fstab
    assert ("/data/models", "/opt/models") in host.mounts()
    # Idempotent: a second config adds nothing.
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=MOUNTS)) == [0, 0]
    assert host.read("/etc/fstab") == fstab
    # After a reboot fstab brings the mounts back; the post-interrupt check agrees.
    simulate_reboot(host)
    assert codes(run_stages(host, PACKAGE, ["post-interrupt"], configmaps=MOUNTS)) == [0, 0]


def test_check_fails_when_a_mount_is_gone(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=MOUNTS)) == [0, 0]
    host.write("/proc/mounts", "/dev/sda1 / ext4 rw 0 0\n")  # someone unmounted them
    runs = run_stages(host, PACKAGE, ["config-check"], configmaps=MOUNTS)
    assert codes(runs) == [1]
    assert "/opt/models is not mounted" in runs[0].result.output


def test_dropped_line_is_unmounted_and_removed(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=MOUNTS)) == [0, 0]
    runs = run_stages(host, PACKAGE, ["config"], configmaps={"mounts": "/data/nvme /var/lib/scratch\n"})
    assert codes(runs) == [0, 0]
    assert "/opt/models" not in host.read("/etc/fstab")
    assert [t for _, t in host.mounts()] == ["/", "/var/lib/scratch"]


def test_missing_source_and_missing_key_fail_clearly(host: HostRoot) -> None:
    runs = run_stages(host, PACKAGE, ["config"], configmaps={"mounts": "/nope /mnt/x\n"})
    assert codes(runs) == [1]
    assert "source /nope does not exist" in runs[0].result.output
    os.remove(host.host("/var/lib/skyhook/test/bind-mount-1.0.0-local-1/configmaps/mounts"))
    missing = run_stages(host, PACKAGE, ["config"])
    assert "expected_config_files missing from configmaps/: mounts" in missing[0].result.output


def test_uninstall_unmounts_everything(host: HostRoot) -> None:
    runs = run_stages(host, PACKAGE, ["config", "uninstall"], configmaps=MOUNTS)
    assert codes(runs) == [0, 0, 0, 0], runs[-1].result.output
    assert "fleetwright:" not in host.read("/etc/fstab")
    assert [t for _, t in host.mounts()] == ["/"]
    with open(host.host("/etc/fstab"), "a", encoding="utf-8") as handle:
        handle.write("/data/nvme /var/lib/scratch none bind,nofail 0 0 # fleetwright:bind-mount\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"], configmaps=MOUNTS)) == [1]
