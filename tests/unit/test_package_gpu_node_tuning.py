"""Catalog-shaped package ``gpu_node_tuning``: an underscore name, the distributions' drop-in
directories, realistic kernel keys and a reboot interrupt, as NodeWright's tuning packages use
them (needs root)."""

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

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "gpu-node-tuning")
KEY = "gpu-node-tuning"  # the package key run_stages derives from package_name gpu_node_tuning
REBOOT = interrupts.InterruptRequest(interrupts.NODE_RESTART)
INSTALL = ["config", "interrupt", "post-interrupt"]


def test_lints_clean() -> None:
    report = lint(PACKAGE)
    assert report.errors == []
    assert report.warnings == []


def test_package_test_installs_it_through_a_reboot(tmp_path: Path) -> None:
    chroot_root(tmp_path)  # fails early, naming the reason, when not root
    args = ["package", "test", PACKAGE, "--interrupt", "reboot", *(f"--mode={m}" for m in INSTALL)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "gpu-node-tuning: live kernel settings match" in result.output


def test_drop_ins_live_values_and_kernel_arguments(tmp_path: Path) -> None:
    host = chroot_root(tmp_path)
    runs = run_stages(host, PACKAGE, INSTALL, interrupt=REBOOT)
    assert all(r.ok for r in runs), runs[-1].result.output
    assert host.sysctl("kernel.threads-max") == "4194304"
    assert host.sysctl("vm.min_free_kbytes") == "1048576"
    assert "* hard memlock unlimited" in host.read(f"/etc/security/limits.d/90-{KEY}.conf")
    assert "iommu=pt pci=realloc=off" in host.read(f"/etc/default/grub.d/90-{KEY}.cfg")
    assert "iommu=pt" in host.cmdline()


def test_a_value_already_above_the_preset_is_kept(tmp_path: Path) -> None:
    host = chroot_root(tmp_path)
    host.set_sysctl("kernel.threads-max", "8388608")
    runs = run_stages(host, PACKAGE, ["config"], configmaps={"sysctl.conf": "vm.swappiness = 1\n"})
    assert codes(runs) == [0, 0], runs[-1].result.output
    written = host.read(f"/etc/sysctl.d/90-{KEY}.conf")
    assert "kernel.threads-max = 8388608\n" in written
    assert "vm.swappiness = 1\n" in written
    assert host.sysctl("vm.swappiness") == "1"


def test_a_key_the_kernel_lacks_fails_and_names_it(tmp_path: Path) -> None:
    host = chroot_root(tmp_path)
    runs = run_stages(host, PACKAGE, ["config"], configmaps={"sysctl.conf": "vm.no_such_key = 1\n"})
    assert codes(runs) == [1]
    assert "vm.no_such_key: not a kernel setting on this host" in runs[0].result.output


def test_amazon_linux_has_no_grub_drop_ins_and_still_tunes(tmp_path: Path) -> None:
    host = chroot_root(tmp_path, "al2023")
    runs = run_stages(host, PACKAGE, INSTALL, interrupt=REBOOT)
    assert all(r.ok for r in runs), runs[-1].result.output
    assert "kernel arguments left unchanged" in runs[0].result.output
    assert host.sysctl("vm.min_free_kbytes") == "1048576"


def test_uninstall_removes_every_drop_in(tmp_path: Path) -> None:
    host = chroot_root(tmp_path)
    assert all(r.ok for r in run_stages(host, PACKAGE, [*INSTALL, "uninstall"], interrupt=REBOOT))
    assert not host.exists(f"/etc/default/grub.d/90-{KEY}.cfg")
    assert "iommu=pt" not in host.read("/boot/grub/grub.cfg")
    host.write(f"/etc/sysctl.d/90-{KEY}.conf", "vm.swappiness = 1\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"])) == [1]
