"""Throwaway roots look like the distribution their ``--os`` flavour names (needs root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetwright.packagetest import HostRootError, toolbox
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.flavours import FLAVOURS
from fleetwright.packagetest.hostroot import HostRoot, build
from fleetwright.packagetest.runner import drops_capabilities, sandbox_prefix

pytestmark = pytest.mark.unit

EVERY_DISTRIBUTION = (
    "/etc/sysctl.d",
    "/etc/security/limits.d",
    "/etc/profile.d",
    "/etc/ld.so.conf.d",
    "/etc/modprobe.d",
    "/etc/modules-load.d",
    "/etc/systemd/system",
)
TOOLS = {
    "debian": {"apt", "apt-get", "dpkg", "update-grub"},
    "al2023": {"dnf", "yum", "rpm", "grubby"},
    "cos": set(),
}
EVERY_TOOL = set().union(*TOOLS.values())


def in_root(root: HostRoot, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", script],
        preexec_fn=lambda: os.chroot(root.path),
        env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(params=sorted(TOOLS))
def root(request: pytest.FixtureRequest, tmp_path: Path) -> HostRoot:
    if os.geteuid() != 0:
        pytest.fail("throwaway roots are entered with chroot and need root")
    return build(str(tmp_path / request.param), flavour=request.param)


def flavour(root: HostRoot) -> str:
    return os.path.basename(root.path)


def test_the_drop_in_directories_of_every_distribution_exist(root: HostRoot) -> None:
    for directory in EVERY_DISTRIBUTION:
        assert os.path.isdir(root.host(directory)), directory
    assert os.path.isdir(root.host("/etc/default/grub.d")) == (flavour(root) == "debian")
    assert "/etc/ld.so.conf.d/*.conf" in root.read("/etc/ld.so.conf")
    assert "/etc/profile.d/" in root.read("/etc/profile")


def test_each_flavour_has_its_own_package_manager_and_boot_loader_tools(root: HostRoot) -> None:
    found = in_root(root, "for t in " + " ".join(sorted(EVERY_TOOL)) + "; do command -v $t; done")
    assert {os.path.basename(p) for p in found.stdout.split()} == TOOLS[flavour(root)]


def test_kernel_keys_that_tuning_packages_read_are_there(root: HostRoot) -> None:
    keys = "kernel.threads-max vm.min_free_kbytes net.core.netdev_max_backlog net.ipv4.tcp_rmem kernel.shmmax"
    shown = in_root(root, f"sysctl {keys}")
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.splitlines()) == len(keys.split())
    listed = in_root(root, "sysctl -a")
    assert "vm.min_free_kbytes = " in listed.stdout
    assert len(listed.stdout.splitlines()) >= 40


def test_systemctl_status_reports_the_unit_like_systemd(root: HostRoot) -> None:
    running = in_root(root, "systemctl status containerd")
    assert running.returncode == 0, running.stderr
    assert "Active: active (running)" in running.stdout
    stopped = in_root(root, "systemctl stop containerd && systemctl status containerd.service")
    assert stopped.returncode == 3
    assert "Active: inactive (dead)" in stopped.stdout
    unknown = in_root(root, "systemctl status no-such-unit")
    assert unknown.returncode == 4
    assert "Unit no-such-unit.service could not be found." in unknown.stderr
    simulate_reboot(root)
    assert in_root(root, "systemctl is-active containerd kubelet").stdout.split() == ["active", "active"]


def test_ldconfig_and_login_shells_see_the_drop_ins(root: HostRoot) -> None:
    root.write("/etc/ld.so.conf.d/gpu.conf", "/usr/local/gpu/lib64\n")
    root.write("/usr/local/gpu/lib64/libgpu.so.1", "")
    root.write("/etc/profile.d/gpu.sh", 'export PATH="$PATH:/usr/local/gpu/bin"\n')
    assert "libgpu.so.1" not in in_root(root, "ldconfig -p").stdout
    assert in_root(root, "ldconfig").returncode == 0
    assert (
        "libgpu.so.1 (libc6,x86-64) => /usr/local/gpu/lib64/libgpu.so.1"
        in in_root(root, "ldconfig -p").stdout
    )
    login = in_root(root, "bash -lc 'echo $PATH'")
    assert login.stdout.strip().endswith(":/usr/local/gpu/bin"), login.stderr


def test_a_write_through_a_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    # A real root has absolute links such as /var/run -> /run: resolved here they name this machine.
    root = HostRoot(str(tmp_path / "root"))
    os.makedirs(root.host("/var"))
    os.symlink(str(tmp_path / "machine"), root.host("/var/run"))
    os.makedirs(tmp_path / "machine")
    for path in ("/var/run/x", "/var/run/new/x"):
        with pytest.raises(HostRootError, match="resolves outside the root"):
            root.write(path, "y")
    assert os.listdir(tmp_path / "machine") == []


def test_a_real_root_diverts_every_fake_host_tool_under_both_merged_usr_names() -> None:
    paths = toolbox.diverted(FLAVOURS["debian-real"])
    for tool in ("/bin/systemctl", "/usr/bin/systemctl", "/sbin/sysctl", "/usr/sbin/sysctl", "/sbin/reboot"):
        assert tool in paths
    assert "/usr/sbin/modprobe" in paths
    assert "/bin/mount" in paths
    # The distribution's own package manager and loader cache stay real; the fakes' helpers are no tools.
    assert not {"/usr/bin/apt-get", "/usr/bin/dpkg", "/usr/sbin/ldconfig", "/sbin/ldconfig"} & set(paths)
    assert not [p for p in paths if p.startswith("/usr/lib/fake-host")]
    with pytest.raises(HostRootError, match="real distribution root"):
        build("/nonexistent", flavour="debian-real")


def test_the_agent_runs_without_the_capabilities_that_act_on_this_machines_kernel() -> None:
    if os.geteuid() != 0:
        pytest.fail("the sandbox is probed as root")
    assert drops_capabilities()
    # reboot(2) with a wrong magic number: EPERM without CAP_SYS_BOOT, EINVAL (and nothing else) with it.
    probe = "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); libc.syscall(169, 0, 0, 0, 0); "
    probe += "print(os.strerror(ctypes.get_errno()))"
    sandboxed = subprocess.run(
        [*sandbox_prefix(), sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert sandboxed.stdout.strip() == "Operation not permitted"
    bare = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert bare.stdout.strip() == "Invalid argument"
