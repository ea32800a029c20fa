"""Catalog package ``tuning``: drop-ins, live values after the interrupt, clean uninstall (needs root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetwright.agent import interrupts
from fleetwright.cli.package import lint
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.hostroot import HostRoot, build
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import codes

pytestmark = pytest.mark.unit

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "tuning")
NAME = "999-tuning-tuning"
CONFIG = {
    "sysctl.conf": "# comment\nvm.swappiness = 10\nnet.core.somaxconn=65535\n",
    "ulimit.conf": "memlock=unlimited\nnofile = 1048576\n",
    "service_containerd.conf": "[Service]\nLimitNOFILE=1048576\nLimitMEMLOCK=infinity\n",
    "grub.conf": "iommu=pt\n# comment\npci=realloc=off\n",
}


def test_lints_clean() -> None:
    report = lint(PACKAGE)
    assert report.errors == []
    assert report.warnings == []


def test_config_writes_drop_ins_and_applies_sysctl_live(host: HostRoot) -> None:
    runs = run_stages(host, PACKAGE, ["apply", "config"], configmaps=CONFIG)
    assert codes(runs) == [0, 0, 0, 0], runs[-1].result.output
    assert host.sysctl("vm.swappiness") == "10"
    assert host.sysctl("net.core.somaxconn") == "65535"
    assert host.read(f"/etc/sysctl.d/{NAME}.conf") == CONFIG["sysctl.conf"]
    assert (
        host.read(f"/etc/security/limits.d/{NAME}.conf")
        == "* hard memlock unlimited\n* hard nofile 1048576\n"
    )
    assert "pam_limits" in host.read("/etc/pam.d/common-session")
    assert (
        host.read(f"/etc/systemd/system/containerd.service.d/{NAME}.conf")
        == CONFIG["service_containerd.conf"]
    )
    assert "systemctl daemon-reload" in host.calls()
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} iommu=pt pci=realloc=off"' in host.read(
        f"/etc/default/grub.d/{NAME}.cfg"
    )
    assert "quiet iommu=pt pci=realloc=off" in host.read("/boot/grub/grub.cfg")


def test_config_check_fails_when_a_drop_in_is_missing(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=CONFIG)) == [0, 0]
    os.remove(host.host(f"/etc/sysctl.d/{NAME}.conf"))
    check = run_stages(host, PACKAGE, ["config-check"], configmaps=CONFIG)
    assert codes(check) == [1]
    assert "sysctl 'vm.swappiness=10' is not in" in check[0].result.output


def test_post_interrupt_check_verifies_live_values(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=CONFIG)) == [0, 0]
    # Before the reboot the kernel arguments are not live: the check must fail.
    before = run_stages(host, PACKAGE, ["post-interrupt"], configmaps=CONFIG)
    assert codes(before) == [0, 1]
    assert "kernel argument 'iommu=pt' is not in /proc/cmdline" in before[-1].result.output
    simulate_reboot(host)
    after = run_stages(host, PACKAGE, ["post-interrupt"], configmaps=CONFIG)
    assert codes(after) == [0, 0], after[-1].result.output
    # Someone changes a value behind our back: the live check notices.
    host.set_sysctl("vm.swappiness", "60")
    drifted = run_stages(host, PACKAGE, ["post-interrupt-check"], configmaps=CONFIG)
    assert codes(drifted) == [1]
    assert "sysctl vm.swappiness is '60', expected '10'" in drifted[0].result.output


def test_reboot_interrupt_then_post_interrupt_through_the_agent(host: HostRoot) -> None:
    runs = run_stages(
        host, PACKAGE, ["config", "interrupt", "post-interrupt"], configmaps=CONFIG, interrupt=None
    )
    # config, config-check, a noop interrupt (no reboot), post-interrupt (no steps), then its check
    # fails because the kernel arguments are not live without a reboot.
    assert codes(runs) == [0, 0, 0, 0, 1]
    reboot = interrupts.InterruptRequest(interrupts.NODE_RESTART)
    runs = run_stages(host, PACKAGE, ["interrupt", "post-interrupt"], configmaps=CONFIG, interrupt=reboot)
    assert [r.mode for r in runs] == [
        "interrupt (before reboot)",
        "interrupt",
        "post-interrupt",
        "post-interrupt-check",
    ]
    assert codes(runs) == [1, 0, 0, 0], runs[-1].result.output


def test_removed_key_removes_its_drop_in(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=CONFIG)) == [0, 0]
    for key in ("sysctl.conf", "service_containerd.conf"):
        os.remove(host.host(f"/var/lib/skyhook/test/tuning-1.0.0-local-1/configmaps/{key}"))
    assert codes(run_stages(host, PACKAGE, ["config"])) == [0, 0]
    assert not host.exists(f"/etc/sysctl.d/{NAME}.conf")
    assert not host.exists(f"/etc/systemd/system/containerd.service.d/{NAME}.conf")


def test_uninstall_removes_everything_and_its_check_really_checks(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=CONFIG)) == [0, 0]
    assert codes(run_stages(host, PACKAGE, ["uninstall"])) == [0, 0]
    for path in (f"/etc/sysctl.d/{NAME}.conf", f"/etc/default/grub.d/{NAME}.cfg"):
        assert not host.exists(path)
    assert "pci=realloc=off" not in host.read("/boot/grub/grub.cfg")
    host.write(f"/etc/security/limits.d/{NAME}.conf", "* hard nofile 1\n")
    left = run_stages(host, PACKAGE, ["uninstall-check"])
    assert codes(left) == [1]
    assert "drop-ins still present" in left[0].result.output


def test_grub_on_a_host_without_update_grub_fails_clearly(tmp_path: Path) -> None:
    host = build(str(tmp_path / "al2023"), flavour="al2023")
    assert not host.exists("/usr/sbin/update-grub")  # Amazon Linux has grubby instead
    runs = run_stages(host, PACKAGE, ["config"], configmaps={"grub.conf": "iommu=pt\n"})
    assert codes(runs) == [1]
    assert "GRUB kernel arguments need a Debian/Ubuntu host" in runs[0].result.output


def test_bad_ulimit_name_fails_and_names_it(host: HostRoot) -> None:
    runs = run_stages(host, PACKAGE, ["config"], configmaps={"ulimit.conf": "nofiles=10\n"})
    assert codes(runs) == [1]
    assert "ulimit.conf: unknown limit 'nofiles'" in runs[0].result.output
