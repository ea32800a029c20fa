"""A throwaway root filesystem that stands in for a node's host root, and reading its state.

It owns laying out a root for one ``--os`` flavour (``build``; ``unpack`` for a real flavour, from
the root the image builder made with the distribution's tools) and the ``HostRoot`` handle tests
and ``fleetwright package test`` use to read and set what a package changed: files, the recorded
calls of the fake host tools, and the "kernel" state the fakes keep in plain files of the root
(``/proc/sys``, ``/proc/modules``, ``/proc/cmdline``, ``/proc/mounts``). It never touches anything
outside its root; the programs inside it come from ``toolbox``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import uuid

from fleetwright.packagetest import HostRootError, toolbox
from fleetwright.packagetest.flavours import (
    BASE_DIRECTORIES,
    BASE_FILES,
    BASE_MODULES,
    BASE_UNITS,
    DEFAULT_KERNEL,
    FLAVOURS,
    Flavour,
    sysctls,
)

# Where the fake tools log their calls and keep their knobs (fakes/usr/lib/fake-host/record.sh).
CALL_LOG = "/var/log/fake-host/calls"
FAKE_STATE = "/var/lib/fake-host"
FLAVOUR_FILE = f"{FAKE_STATE}/flavour"


class HostRoot:
    """A built throwaway root. Paths given to its helpers are host-absolute (``/etc/fstab``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def host(self, path: str) -> str:
        return os.path.join(self.path, path.lstrip("/"))

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.host(path))

    def read(self, path: str) -> str:
        with open(self.host(path), encoding="utf-8") as handle:
            return handle.read()

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        target = self.host(path)
        # A real root has absolute links (/var/run -> /run): resolved here they would name this
        # machine's files, so a write is refused unless it lands inside the root.
        inside = os.path.realpath(os.path.dirname(target))
        if os.path.commonpath([inside, os.path.realpath(self.path)]) != os.path.realpath(self.path):
            raise HostRootError(f"{path} resolves outside the root ({inside}): not written")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(target):
            os.unlink(target)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(target, mode)

    def calls(self) -> list[str]:
        """Every call of a fake host tool so far, as ``"tool arg ..."``."""
        return self.read(CALL_LOG).splitlines() if self.exists(CALL_LOG) else []

    def boot_id(self) -> str:
        return self.read("/proc/sys/kernel/random/boot_id").strip()

    def sysctl(self, key: str) -> str:
        return self.read("/proc/sys/" + key.replace(".", "/")).strip()

    def set_sysctl(self, key: str, value: str) -> None:
        self.write("/proc/sys/" + key.replace(".", "/"), value + "\n")

    def modules(self) -> list[str]:
        return [line.split()[0] for line in self.read("/proc/modules").splitlines() if line.strip()]

    def load_module(self, name: str, *, busy: bool = False) -> None:
        if name not in self.modules():
            with open(self.host("/proc/modules"), "a", encoding="utf-8") as handle:
                handle.write(f"{name} 16384 {int(busy)} - Live 0x0000000000000000\n")
        if busy:
            self.write(f"{FAKE_STATE}/busy-modules/{name}", "")

    def mounts(self) -> list[tuple[str, str]]:
        return [(f[0], f[1]) for f in (line.split() for line in self.read("/proc/mounts").splitlines()) if f]

    def unit_state(self, unit: str) -> str:
        path = f"/run/fake-systemd/{unit}.state"
        return self.read(path).strip() if self.exists(path) else "inactive"

    def fake_state(self, name: str, text: str = "") -> None:
        """Set a knob of the fake host, e.g. ``reboot-mode`` or ``offline``."""
        self.write(f"{FAKE_STATE}/{name}", text)

    def cmdline(self) -> str:
        return self.read("/proc/cmdline").strip()

    def flavour(self) -> Flavour:
        """The distribution this root was built as."""
        return FLAVOURS[self.read(FLAVOUR_FILE).strip()]


def flavour_named(name: str) -> Flavour:
    if name not in FLAVOURS:
        known = ", ".join(f"{n} ({'real' if f.real else 'fake'})" for n, f in FLAVOURS.items())
        raise HostRootError(f"the OS flavour must be one of {known}, got {name!r}")
    return FLAVOURS[name]


def build(path: str, *, flavour: str = "debian", kernel: str = DEFAULT_KERNEL) -> HostRoot:
    """Build a root at ``path`` (created if missing) for ``flavour``: debian, cos or al2023.

    Its ``reboot``, ``systemctl``, ``sysctl`` and the other host tools only record the call and
    change files of the root; ``boot.simulate_reboot`` plays the kernel and init afterwards.
    A real flavour is not built here but unpacked from its built root (``unpack``).
    """
    chosen = flavour_named(flavour)
    if chosen.real:
        raise HostRootError(f"{flavour} is a real distribution root: unpack its built root instead")
    os.makedirs(path, exist_ok=True)
    root = HostRoot(path)
    toolbox.install(path, chosen)
    _seed(root, chosen, kernel)
    toolbox.verify_static(path)
    return root


def unpack(path: str, tarball: str, *, flavour: str, kernel: str = DEFAULT_KERNEL) -> HostRoot:
    """A real ``flavour`` root at ``path`` from the tar the image builder made of it.

    Its package manager, shell and libraries are the distribution's own; the host tools that
    act on the kernel, init or mounts (``reboot``, ``systemctl``, ``sysctl``, ``modprobe``,
    ``mount``, ...) are the same recording fakes as on every root, at the paths the build
    diverted from the distribution's packages, and ``/proc`` and ``/sys`` are the fakes' files.
    """
    chosen = flavour_named(flavour)
    if not chosen.real:
        raise HostRootError(f"{flavour} is not a real distribution root: build it instead")
    os.makedirs(path, exist_ok=True)
    # GNU tar as root keeps owners, modes and the device nodes mmdebstrap made.
    done = subprocess.run(
        ["tar", "--extract", "--numeric-owner", "--file", tarball, "--directory", path],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise HostRootError(f"cannot unpack {tarball}: {done.stderr.strip()}")
    root = HostRoot(path)
    toolbox.install_fakes(path, chosen)
    # Only this machine's resolver: the root's apt reaches the archive as this machine does.
    with open("/etc/resolv.conf", encoding="utf-8") as handle:
        root.write("/etc/resolv.conf", handle.read())
    # Maintainer scripts ask before starting a daemon; 101 is "not in this root" (a chroot's
    # answer everywhere), so no daemon of an installed package ever runs here.
    root.write("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)
    _seed(root, chosen, kernel)
    return root


def _device(root: HostRoot, name: str, major: int, minor: int) -> None:
    path = root.host(f"/dev/{name}")
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)  # noqa: S103 - /dev/null is world-writable on every host
    except OSError:
        # Without CAP_MKNOD a plain file still lets scripts redirect to /dev/null.
        with open(path, "w", encoding="utf-8"):
            pass


def _seed_filesystem(root: HostRoot, flavour: Flavour) -> None:
    for directory in ("tmp", "var/tmp"):
        os.makedirs(root.host(directory), exist_ok=True)
        os.chmod(root.host(directory), 0o1777)  # noqa: S103 - sticky, world-writable like any /tmp
    os.makedirs(root.host("/dev"), exist_ok=True)
    for name, major, minor in (("null", 1, 3), ("zero", 1, 5), ("random", 1, 8), ("urandom", 1, 9)):
        if not root.exists(f"/dev/{name}"):
            _device(root, name, major, minor)
    for directory in (*BASE_DIRECTORIES, *flavour.directories):
        os.makedirs(root.host(directory), exist_ok=True)
    files = {**BASE_FILES, **flavour.files}
    if not flavour.real:
        files["/etc/os-release"] = flavour.os_release
    for path, text in files.items():
        # A real root's own files (passwd, os-release, PAM) are the distribution's: kept.
        if not (flavour.real and root.exists(path)):
            root.write(path, text)
    root.write(FLAVOUR_FILE, flavour.name + "\n")


def _seed_units(root: HostRoot) -> None:
    os.makedirs(root.host("/run/fake-systemd"), exist_ok=True)
    for unit in BASE_UNITS:
        if not root.exists(f"/usr/lib/systemd/system/{unit}"):  # a real root may ship it
            root.write(f"/usr/lib/systemd/system/{unit}", f"[Unit]\nDescription={unit}\n")
        root.write(f"/etc/systemd/system/multi-user.target.wants/{unit}", "")
        root.write(f"/run/fake-systemd/{unit}.state", "active\n")


def _seed(root: HostRoot, flavour: Flavour, kernel: str) -> None:
    _seed_filesystem(root, flavour)
    root.write("/proc/sys/kernel/random/boot_id", str(uuid.uuid4()) + "\n")
    root.write("/proc/sys/kernel/osrelease", kernel + "\n")
    root.write("/proc/cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{kernel} root=/dev/sda1 ro quiet\n")
    root.write("/proc/mounts", "/dev/sda1 / ext4 rw,relatime 0 0\n")
    root.write("/proc/modules", "".join(f"{m} 16384 0 - Live 0x0000000000000000\n" for m in BASE_MODULES))
    root.write("/sys/kernel/kexec_crash_loaded", "0\n")
    root.write(f"/boot/vmlinuz-{kernel}", "")
    for key, value in sysctls(flavour).items():
        root.set_sysctl(key, value)
    _seed_units(root)
