"""Catalog package ``kdump`` in a chroot (needs root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.cli.package import lint
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.hostroot import HostRoot, build
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import codes

pytestmark = pytest.mark.unit

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "kdump")
MAPS = {"crashkernel": "512M\n", "coredir": "/var/crash/gpu\n"}


def test_lints_clean() -> None:
    assert lint(PACKAGE).errors == []


def test_apply_installs_kdump_tools_and_check_fails_without_it(host: HostRoot) -> None:
    missing = run_stages(host, PACKAGE, ["apply-check"], configmaps=MAPS)
    assert codes(missing) == [1]
    assert "kdump-config is not installed" in missing[0].result.output
    assert codes(run_stages(host, PACKAGE, ["apply"], configmaps=MAPS)) == [0, 0]
    assert "apt-get install -y --no-install-recommends kdump-tools" in host.calls()


def test_config_then_reboot_loads_the_crash_kernel(host: HostRoot) -> None:
    runs = run_stages(host, PACKAGE, ["apply", "config"], configmaps=MAPS)
    assert codes(runs) == [0, 0, 0, 0], runs[-1].result.output
    assert "USE_KDUMP=1" in host.read("/etc/default/kdump-tools")
    assert "crashkernel=512M" in host.read("/boot/grub/grub.cfg")
    before = run_stages(host, PACKAGE, ["post-interrupt-check"], configmaps=MAPS)
    assert codes(before) == [1]
    assert "reboot pending?" in before[0].result.output
    simulate_reboot(host)
    assert codes(run_stages(host, PACKAGE, ["post-interrupt"], configmaps=MAPS)) == [0, 0]
    host.write("/sys/kernel/kexec_crash_loaded", "0\n")  # the crash kernel failed to load
    assert codes(run_stages(host, PACKAGE, ["post-interrupt-check"], configmaps=MAPS)) == [1]


def test_config_check_fails_when_kdump_is_disabled(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply", "config"], configmaps=MAPS)) == [0, 0, 0, 0]
    host.write("/etc/default/kdump-tools", "USE_KDUMP=0\nKDUMP_COREDIR=/var/crash/gpu\n")
    assert codes(run_stages(host, PACKAGE, ["config-check"], configmaps=MAPS)) == [1]


def test_uninstall_disables_and_drops_the_reservation(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply", "config", "uninstall"], configmaps=MAPS)) == [0] * 6
    assert "USE_KDUMP=0" in host.read("/etc/default/kdump-tools")
    assert "crashkernel" not in host.read("/boot/grub/grub.cfg")
    host.write("/etc/default/kdump-tools", "USE_KDUMP=1\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"], configmaps=MAPS)) == [1]


def test_non_debian_host_fails_clearly(tmp_path: Path) -> None:
    host = build(str(tmp_path / "al"), flavour="al2023")
    assert not host.exists("/usr/sbin/update-grub")  # Amazon Linux has grubby instead
    runs = run_stages(host, PACKAGE, ["apply"], configmaps=MAPS)
    assert codes(runs) == [1]
    assert "supports Debian/Ubuntu hosts" in runs[0].result.output
