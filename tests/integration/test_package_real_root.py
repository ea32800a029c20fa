"""``package test --os debian-real``: packages that install OS packages, tested for real.

The root is Debian 12 built by mmdebstrap once per cache (``fleetwright.images.roots``), so these
tests need root and the Debian archive (CI has both); each test unpacks a fresh copy. apt-get and
dpkg install for real; reboot, systemctl, sysctl, modprobe and the kernel's view stay the
recording fakes, and this machine's kernel parameters are compared before and after.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from fleetwright.binaries import cache_dir
from fleetwright.cli import commands
from fleetwright.cli.app import app
from fleetwright.images import roots
from fleetwright.packagetest.hostroot import HostRoot, unpack
from tests.support.lifecycle import CATALOG, LIFECYCLES, in_root, run
from tests.support.payloads import step, write_package

pytestmark = pytest.mark.integration

REAL = "debian-real"
commands.load(["package"])  # as the program does: `fleetwright package` registers its commands
# Calls of a package manager in a step script (apt-get, apt, dpkg -i, or the one a script picks and
# keeps in "$pm" or gets from "$(manager)"): what makes a package's install need a real root. dnf
# is not among them: Amazon Linux cannot be built here, its fake root tests eks-gpu-setup.
OS_PACKAGE_INSTALL = re.compile(r'(\bapt-get|\bapt|\bdpkg|"\$pm"|"\$\(manager\)")\s+(install|-i)\b')


@pytest.fixture(scope="session")
def real_root_tar() -> Path:
    if os.geteuid() != 0:
        pytest.fail("real roots are entered with chroot and need root")
    return roots.build(cache_dir(), REAL)


@pytest.fixture
def real_root(real_root_tar: Path, tmp_path: Path) -> HostRoot:
    return unpack(str(tmp_path / "root"), str(real_root_tar), flavour=REAL)


@pytest.fixture(autouse=True)
def machine_unchanged() -> Iterator[None]:
    """This machine's kernel parameters that the packages here set inside their roots."""
    keys = ("vm/swappiness", "kernel/threads-max", "net/core/somaxconn", "vm/min_free_kbytes")
    before = {key: Path("/proc/sys", key).read_text() for key in keys}
    yield
    assert {key: Path("/proc/sys", key).read_text() for key in keys} == before


def _apt_package_test(directory: Path, deb: str, *options: str) -> Result:
    """``package test --mode apply`` of a package whose apply runs ``apt-get install -y <deb>``
    and whose check is ``command -v tuned``."""
    write_package(
        str(directory),
        {"apply": [step("apply.sh")], "apply-check": [step("apply_check.sh")]},
        {
            "apply.sh": f"#!/bin/sh\nset -e\nDEBIAN_FRONTEND=noninteractive apt-get install -y {deb}\n",
            "apply_check.sh": "#!/bin/sh\ncommand -v tuned\n",
        },
        name="tuned",
    )
    for script in ("apply.sh", "apply_check.sh"):
        (directory / "skyhook_dir" / script).chmod(0o755)
    return CliRunner().invoke(app, ["package", "test", str(directory), "--mode", "apply", *options])


def test_apt_get_install_tuned_passes_and_a_misspelt_name_fails_naming_the_step(
    real_root_tar: Path, tmp_path: Path
) -> None:
    passed = _apt_package_test(tmp_path / "tuned", "tuned", "--os", REAL)
    assert passed.exit_code == 0, passed.output
    assert "Setting up tuned" in passed.output
    assert "=== apply-check: exit 0" in passed.output
    assert "/usr/sbin/tuned" in passed.output

    failed = _apt_package_test(tmp_path / "misspelt", "tunedd", "--os", REAL)
    assert failed.exit_code == 1, failed.output
    assert "=== apply: exit 1" in failed.output
    assert "E: Unable to locate package tunedd" in failed.output
    assert "FAILED: apply.sh: exit code 100" in failed.output
    assert "apply-check" not in failed.output, "the run stops at the failed step"


def test_the_same_package_on_the_fake_root_installs_nothing(tmp_path: Path) -> None:
    result = _apt_package_test(tmp_path / "tuned", "tuned")
    assert result.exit_code == 1, result.output
    assert "=== apply-check: exit 1" in result.output


def test_installed_packages_never_replace_the_fakes(real_root: HostRoot) -> None:
    fake_sysctl = real_root.read("/usr/sbin/sysctl")
    reinstalled = in_root(real_root, "apt-get", "install", "-y", "--reinstall", "procps", "kmod")
    assert reinstalled.returncode == 0, reinstalled.stdout + reinstalled.stderr
    assert real_root.read("/usr/sbin/sysctl") == fake_sysctl
    assert real_root.exists("/usr/sbin/sysctl.distrib"), "procps' own sysctl went beside the fake"
    calls = ["sysctl -w vm.swappiness=7", "modprobe nvidia", "systemctl restart kubelet"]
    done = in_root(real_root, "sh", "-c", " && ".join(calls))
    assert done.returncode == 0, done.stderr
    assert real_root.sysctl("vm.swappiness") == "7"
    assert "nvidia" in real_root.modules()
    assert real_root.calls()[-3:] == calls
    assert "Debian GNU/Linux 12" in real_root.read("/etc/os-release")


def test_the_root_is_cached_by_content(real_root_tar: Path) -> None:
    again = roots.build(cache_dir(), REAL, log=lambda line: pytest.fail(f"built again: {line}"))
    assert again == real_root_tar
    listed = CliRunner().invoke(app, ["package", "roots"])
    assert listed.exit_code == 0, listed.output
    line = next(line for line in listed.output.splitlines() if line.startswith(REAL))
    assert line.split()[1] == "real"
    assert str(real_root_tar) in line
    others = [line for line in listed.output.splitlines()[1:] if not line.startswith(REAL)]
    assert all(line.split()[1] == "fake" for line in others)


def _installs_os_packages(package: str) -> bool:
    scripts = (CATALOG / package / "skyhook-package" / "skyhook_dir").glob("*.sh")
    return any(OS_PACKAGE_INSTALL.search(path.read_text()) for path in scripts)


def test_every_catalog_package_that_installs_os_packages_runs_its_lifecycle_here() -> None:
    catalog = [p.name for p in CATALOG.iterdir() if (p / "Dockerfile").is_file()]
    debian = {name for name in catalog if _installs_os_packages(name)}
    assert debian == {name for name, lc in LIFECYCLES.items() if lc.installs_os_packages}
    assert all(REAL in LIFECYCLES[name].flavours for name in debian)


@pytest.mark.parametrize("package", sorted(n for n, lc in LIFECYCLES.items() if lc.installs_os_packages))
def test_catalog_lifecycle_on_the_real_root(real_root: HostRoot, package: str) -> None:
    results = run(real_root, LIFECYCLES[package])
    failed = [r for r in results if not r.ok]
    assert not failed, f"{failed[0].phase} failed at {failed[0].failed_at}:\n{failed[0].output[-3000:]}"
    assert results[0].phase == "install"
    assert results[-1].phase == "uninstall"
    deb, stays = AFTER_UNINSTALL[package]
    assert (in_root(real_root, "dpkg", "-s", deb).returncode == 0) == stays


# What dpkg knows after the uninstall: kdump leaves kdump-tools to the host's image (its
# uninstall.sh says so); gpu-driver-setup removes its driver.
AFTER_UNINSTALL = {"kdump": ("kdump-tools", True), "gpu-driver-setup": ("gpu-driver-550", False)}
