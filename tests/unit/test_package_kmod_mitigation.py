"""Catalog package ``kmod-mitigation`` (tipc, CVE-2022-0435) in a chroot (needs root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.cli.package import lint
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import codes

pytestmark = pytest.mark.unit

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "kmod-mitigation")
CONF = "/etc/modprobe.d/fleetwright-kmod-mitigation.conf"


def test_lints_clean() -> None:
    assert lint(PACKAGE).errors == []


def test_apply_blocks_and_unloads_the_default_module(host: HostRoot) -> None:
    assert "tipc" in host.modules()
    runs = run_stages(host, PACKAGE, ["apply"])
    assert codes(runs) == [0, 0], runs[-1].result.output
    assert "tipc" not in host.modules()
    assert "install tipc /bin/false" in host.read(CONF)
    assert "modprobe -r tipc" in host.calls()
    simulate_reboot(host)  # the block survives a reboot
    assert "tipc" not in host.modules()
    assert codes(run_stages(host, PACKAGE, ["post-interrupt"])) == [0, 0]


def test_strict_check_fails_while_the_module_is_loaded(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply"])) == [0, 0]
    host.load_module("tipc")  # loaded behind our back (e.g. insmod)
    runs = run_stages(host, PACKAGE, ["apply-check"])
    assert codes(runs) == [1]
    assert "tipc is still loaded: the host is vulnerable" in runs[0].result.output


def test_busy_module_fails_apply_unless_unload_waits_for_reboot(host: HostRoot) -> None:
    host.load_module("dccp", busy=True)
    maps = {"modules": "dccp tipc\n"}
    busy = run_stages(host, PACKAGE, ["apply"], configmaps=maps)
    assert codes(busy) == [1]
    assert "dccp is in use and cannot be unloaded live" in busy[0].result.output
    later = run_stages(
        host, PACKAGE, ["apply", "post-interrupt-check"], configmaps={**maps, "unload": "reboot"}
    )
    assert codes(later) == [0, 0, 1]  # post-interrupt-check stays strict
    simulate_reboot(host)
    assert codes(run_stages(host, PACKAGE, ["post-interrupt"], configmaps={**maps, "unload": "reboot"})) == [
        0,
        0,
    ]


def test_config_change_updates_the_block_list(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply"])) == [0, 0]
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps={"modules": "sctp\n"})) == [0, 0]
    assert "install sctp /bin/false" in host.read(CONF)
    assert "tipc" not in host.read(CONF)


def test_uninstall_lifts_the_block(host: HostRoot) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply", "uninstall"])) == [0, 0, 0, 0]
    assert not host.exists(CONF)
    host.write(CONF, "install tipc /bin/false\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"])) == [1]
