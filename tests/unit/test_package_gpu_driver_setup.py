"""Catalog-shaped package ``gpu_driver_setup``: an underscore name, ``apt``/``dnf`` by flavour,
/etc/profile.d and /etc/ld.so.conf.d drop-ins, ``systemctl status`` after a reboot interrupt, as
NodeWright's setup packages use them (needs root)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.agent import interrupts
from fleetwright.cli.app import app
from fleetwright.cli.package import lint
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import chroot_root, codes

pytestmark = pytest.mark.unit

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "gpu-driver-setup")
KEY = "gpu-driver-setup"
REBOOT = interrupts.InterruptRequest(interrupts.NODE_RESTART)
INSTALL = ["apply", "interrupt", "post-interrupt"]


def test_lints_clean() -> None:
    report = lint(PACKAGE)
    assert report.errors == []
    assert report.warnings == []


def test_package_test_installs_it_through_a_reboot(tmp_path: Path) -> None:
    chroot_root(tmp_path)
    args = ["package", "test", PACKAGE, "--interrupt", "reboot", *(f"--mode={m}" for m in INSTALL)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Active: active (running)" in result.output


@pytest.mark.parametrize(("flavour", "install"), [("debian", "apt"), ("al2023", "dnf")])
def test_installs_with_the_hosts_package_manager(tmp_path: Path, flavour: str, install: str) -> None:
    host = chroot_root(tmp_path, flavour)
    runs = run_stages(host, PACKAGE, INSTALL, interrupt=REBOOT, configmaps={"driver_version": "560\n"})
    assert all(r.ok for r in runs), runs[-1].result.output
    assert f"{install} install -y gpu-driver-560" in host.calls()
    assert "ldconfig " in host.calls()
    assert host.read(f"/etc/ld.so.conf.d/{KEY}.conf") == "/usr/local/gpu/lib64\n"
    assert "/usr/local/gpu/bin" in host.read(f"/etc/profile.d/{KEY}.sh")
    assert host.unit_state("gpu-persistenced.service") == "active"


def test_a_host_without_a_package_manager_fails_clearly(tmp_path: Path) -> None:
    host = chroot_root(tmp_path, "cos")
    runs = run_stages(host, PACKAGE, ["apply"])
    assert codes(runs) == [1]
    assert "no apt or dnf on this host" in runs[0].result.output


def test_the_daemon_not_running_after_the_reboot_fails_the_check(tmp_path: Path) -> None:
    host = chroot_root(tmp_path)
    runs = run_stages(host, PACKAGE, INSTALL, interrupt=REBOOT)
    assert all(r.ok for r in runs)
    host.write("/run/fake-systemd/gpu-persistenced.service.state", "failed\n")
    check = run_stages(host, PACKAGE, ["post-interrupt-check"])
    assert codes(check) == [1]
    assert "gpu-persistenced is not running after the reboot" in check[0].result.output


def test_uninstall(tmp_path: Path) -> None:
    host = chroot_root(tmp_path)
    assert all(r.ok for r in run_stages(host, PACKAGE, [*INSTALL, "uninstall"], interrupt=REBOOT))
    assert "apt remove -y gpu-driver-550" in host.calls()
    assert not host.exists(f"/etc/profile.d/{KEY}.sh")
    host.write(f"/etc/ld.so.conf.d/{KEY}.conf", "/usr/local/gpu/lib64\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"])) == [1]
