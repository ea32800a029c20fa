"""Catalog package ``eks-gpu-setup`` on an AL2023-flavoured root, with the EFA installer served by a
loopback HTTP server (needs root)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from fleetwright.agent import interrupts
from fleetwright.cli.package import lint
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import run_stages
from tests.support.payloads import codes

pytestmark = [pytest.mark.unit, pytest.mark.host_root(flavour="al2023", kernel="6.1.100-1.amzn2023.x86_64")]

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "eks-gpu-setup")
KERNEL = "6.1.119-129.201.amzn2023.x86_64"
# Stands in for aws-efa-installer/efa_installer.sh: installs fi_info and asks for the efa module.
INSTALLER = """#!/bin/sh
mkdir -p /opt/amazon/efa/bin /etc/modules-load.d
printf '#!/bin/sh\\necho "provider: efa"\\n' > /opt/amazon/efa/bin/fi_info
chmod +x /opt/amazon/efa/bin/fi_info
echo efa > /etc/modules-load.d/efa.conf
echo "EFA installed with $*"
"""


def tarball() -> bytes:
    """The installer as a .tar.gz, byte-identical on every call (fixed mtimes) so its sha256 is stable."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = INSTALLER.encode()
        info = tarfile.TarInfo("aws-efa-installer/efa_installer.sh")
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("efa-mirror")
    (directory / "aws-efa-installer-1.38.0.tar.gz").write_bytes(tarball())
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def maps(server: str, sha: str | None = None) -> dict[str, str]:
    return {
        "kernel_version": KERNEL + "\n",
        "efa_installer_url": f"{server}/aws-efa-installer-1.38.0.tar.gz",
        "efa_installer_sha256": (sha or hashlib.sha256(tarball()).hexdigest()) + "\n",
    }


def test_lints_clean() -> None:
    assert lint(PACKAGE).errors == []


def test_install_reboot_and_post_interrupt(host: HostRoot, server: str) -> None:
    reboot = interrupts.InterruptRequest(interrupts.NODE_RESTART)
    runs = run_stages(host, PACKAGE, ["apply", "config"], configmaps=maps(server))
    assert codes(runs) == [0, 0, 0, 0], runs[1].result.output
    calls = host.calls()
    assert f"dnf install -y kernel-{KERNEL}" in calls
    assert f"grubby --set-default /boot/vmlinuz-{KERNEL}" in calls
    assert host.exists("/opt/amazon/efa/bin/fi_info")
    assert "server 169.254.169.123 prefer iburst" in host.read(
        "/etc/chrony.d/fleetwright-eks-gpu-setup.sources"
    )
    before = run_stages(host, PACKAGE, ["post-interrupt-check"], configmaps=maps(server))
    assert codes(before) == [1]
    assert f"expected the pinned {KERNEL}" in before[0].result.output
    after = run_stages(
        host, PACKAGE, ["interrupt", "post-interrupt"], configmaps=maps(server), interrupt=reboot
    )
    assert codes(after) == [1, 0, 0, 0], after[-1].result.output
    assert host.read("/proc/sys/kernel/osrelease").strip() == KERNEL
    # The EFA install is agent-tracked: a second apply does not download again.
    again = run_stages(host, PACKAGE, ["apply"], configmaps=maps(server))
    assert "SKIPPED: efa_install.sh" in again[0].result.output


def test_checksum_mismatch_fails_the_install(host: HostRoot, server: str) -> None:
    runs = run_stages(host, PACKAGE, ["apply"], configmaps=maps(server, sha="0" * 64))
    assert codes(runs) == [1]
    assert "expected " + "0" * 64 in runs[0].result.output
    assert not host.exists("/opt/amazon/efa/bin/fi_info")


def test_unreachable_installer_fails(host: HostRoot, server: str) -> None:
    bad = {**maps(server), "efa_installer_url": f"{server}/missing.tar.gz"}
    runs = run_stages(host, PACKAGE, ["apply"], configmaps=bad)
    assert codes(runs) == [1]
    assert "cannot download" in runs[0].result.output


def test_apply_check_fails_when_the_pin_was_undone(host: HostRoot, server: str) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply"], configmaps=maps(server))) == [0, 0]
    host.write("/var/lib/fake-host/grubby-default", "/boot/vmlinuz-6.1.100-1.amzn2023.x86_64\n")
    runs = run_stages(host, PACKAGE, ["apply-check"], configmaps=maps(server))
    assert codes(runs) == [1]
    assert f"the default boot kernel is not {KERNEL}" in runs[0].result.output


def test_chrony_check_fails_when_chronyd_is_down(host: HostRoot, server: str) -> None:
    assert codes(run_stages(host, PACKAGE, ["config"], configmaps=maps(server))) == [0, 0]
    host.write("/run/fake-systemd/chronyd.service.state", "failed\n")
    assert codes(run_stages(host, PACKAGE, ["config-check"], configmaps=maps(server))) == [1]


def test_upgrade_passes_both_versions(host: HostRoot, server: str) -> None:
    assert codes(run_stages(host, PACKAGE, ["apply"], configmaps=maps(server))) == [0, 0]
    runs = run_stages(host, PACKAGE, ["upgrade"], configmaps=maps(server))
    assert codes(runs) == [0, 0], runs[0].result.output
    assert host.read("/var/lib/fleetwright/eks-gpu-setup.upgrades") == "1.0.0 -> 1.0.0\n"


def test_uninstall_unpins(host: HostRoot, server: str) -> None:
    runs = run_stages(host, PACKAGE, ["apply", "uninstall"], configmaps=maps(server))
    assert codes(runs) == [0, 0, 0, 0], runs[-1].result.output
    assert f"kernel-{KERNEL}" not in host.read("/etc/dnf/plugins/versionlock.list")
    host.write("/etc/chrony.d/fleetwright-eks-gpu-setup.sources", "server x\n")
    assert codes(run_stages(host, PACKAGE, ["uninstall-check"], configmaps=maps(server))) == [1]
