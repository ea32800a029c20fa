"""Catalog package ``gke-cos-tuning`` on a COS-flavoured root in a chroot (needs root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetwright.agent import interrupts
from fleetwright.cli.package import lint
from fleetwright.packagetest.hostroot import HostRoot, build
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import codes

pytestmark = [pytest.mark.unit, pytest.mark.host_root(flavour="cos")]

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "gke-cos-tuning")
MAPS = {
    "sysctl.conf": "net.core.somaxconn = 32768\nvm.max_map_count=262144\n",
    "service_containerd.conf": "[Service]\nLimitNOFILE=1048576\n",
}
RESTART = interrupts.InterruptRequest(interrupts.SERVICE_RESTART, ("containerd.service",))


def files(root: HostRoot, top: str) -> set[str]:
    found = set()
    for dirpath, _, names in os.walk(root.host(top)):
        found |= {os.path.join(dirpath, n) for n in names}
    return found


def test_lints_clean() -> None:
    assert lint(PACKAGE).errors == []


def test_config_service_interrupt_and_live_check(host: HostRoot) -> None:
    outside_etc = {top: files(host, top) for top in ("/usr", "/bin", "/boot", "/lib")}
    runs = run_stages(
        host, PACKAGE, ["config", "interrupt", "post-interrupt"], configmaps=MAPS, interrupt=RESTART
    )
    assert codes(runs) == [0, 0, 0, 0, 0], runs[-1].result.output
    assert host.sysctl("net.core.somaxconn") == "32768"
    assert (
        host.read("/etc/systemd/system/containerd.service.d/99-gke-cos-tuning.conf")
        == MAPS["service_containerd.conf"]
    )
    assert "systemctl restart containerd.service" in host.calls()
    # Read-only root: nothing outside /etc (and run-time state) was written.
    assert {top: files(host, top) for top in outside_etc} == outside_etc
    assert not any(call.startswith("update-grub") for call in host.calls())


def test_post_interrupt_check_fails_while_the_service_is_down(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=MAPS)) == [0, 0]
    host.write("/run/fake-systemd/containerd.service.state", "failed\n")  # it did not come back
    runs = run_stages(host, PACKAGE, ["post-interrupt-check"], configmaps=MAPS)
    assert codes(runs) == [1]
    assert "containerd is not active" in runs[0].result.output


def test_config_check_sees_live_drift(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=MAPS)) == [0, 0]
    host.set_sysctl("vm.max_map_count", "65530")
    runs = run_stages(host, PACKAGE, ["config-check"], configmaps=MAPS)
    assert codes(runs) == [1]
    assert "vm.max_map_count is '65530', expected '262144'" in runs[0].result.output


def test_grub_and_non_cos_hosts_are_refused(host: HostRoot, tmp_path: Path) -> None:
    grub = run_stages(host, PACKAGE, ["config"], configmaps={**MAPS, "grub.conf": "iommu=pt\n"})
    assert codes(grub) == [1]
    assert "kernel arguments cannot be changed on COS" in grub[0].result.output
    debian = build(str(tmp_path / "debian"))
    other = run_stages(debian, PACKAGE, ["config"], configmaps=MAPS)
    assert codes(other) == [1]
    assert "is for Container-Optimized OS" in other[0].result.output


def test_uninstall(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["config", "uninstall"], configmaps=MAPS)) == [0, 0, 0, 0]
    assert not host.exists("/etc/sysctl.d/99-gke-cos-tuning.conf")
    host.write("/etc/sysctl.d/99-gke-cos-tuning.conf", "x=1\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"], configmaps=MAPS)) == [1]
