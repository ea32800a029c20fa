"""A simulated reboot of a throwaway root: the part the kernel and init play on a real node.

It owns what survives a reboot and what a boot derives from the root's files: a new boot id,
the kernel and command line from the boot loader's configuration, sysctl.d applied over the
kernel defaults, modules from modules-load.d (minus blacklisted ones), fstab bind mounts, and
enabled systemd units active with their drop-ins. It never runs anything; it only rewrites
files of the root.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid

from fleetwright.packagetest.flavours import BASE_MODULES, sysctls
from fleetwright.packagetest.hostroot import FAKE_STATE, HostRoot


def simulate_reboot(root: HostRoot) -> str:
    """Boot ``root`` again and return its new boot id."""
    new_id = str(uuid.uuid4())
    root.write("/proc/sys/kernel/random/boot_id", new_id + "\n")
    _kernel(root)
    _sysctl(root)
    _modules(root)
    _mounts(root)
    _units(root)
    return new_id


def _glob(directory: str, suffix: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(suffix))


def _kernel(root: HostRoot) -> None:
    grubby = f"{FAKE_STATE}/grubby-default"
    if root.exists(grubby):
        image = root.read(grubby).strip()
        root.write("/proc/sys/kernel/osrelease", image.removeprefix("/boot/vmlinuz-") + "\n")
    kernel = root.read("/proc/sys/kernel/osrelease").strip()
    args = "root=/dev/sda1 ro quiet"
    if root.exists("/boot/grub/grub.cfg"):
        match = re.search(r"^\s*linux\s+\S+\s+(.*)$", root.read("/boot/grub/grub.cfg"), re.MULTILINE)
        args = " ".join(match.group(1).split()) if match else args
    root.write("/proc/cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{kernel} {args}\n")
    loaded = "0"
    if "crashkernel=" in args and root.exists("/etc/default/kdump-tools"):
        loaded = "1" if re.search(r"^USE_KDUMP=1", root.read("/etc/default/kdump-tools"), re.M) else "0"
    root.write("/sys/kernel/kexec_crash_loaded", loaded + "\n")


def _sysctl(root: HostRoot) -> None:
    for key, value in sysctls(root.flavour()).items():
        root.set_sysctl(key, value)
    files = [*_glob(root.host("/etc/sysctl.d"), ".conf"), root.host("/etc/sysctl.conf")]
    for path in files:
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if "=" in line and not line.lstrip().startswith(("#", ";")):
                    key, value = (part.strip() for part in line.split("=", 1))
                    if root.exists("/proc/sys/" + key.replace(".", "/")):
                        root.set_sysctl(key, value)


def _modules(root: HostRoot) -> None:
    blocked: set[str] = set()
    for path in _glob(root.host("/etc/modprobe.d"), ".conf"):
        with open(path, encoding="utf-8") as handle:
            for fields in (line.split() for line in handle):
                if len(fields) >= 2 and fields[0] in ("blacklist", "install"):
                    blocked.add(fields[1])
    wanted = list(BASE_MODULES)
    for path in _glob(root.host("/etc/modules-load.d"), ".conf"):
        with open(path, encoding="utf-8") as handle:
            wanted += [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    lines = [f"{m} 16384 0 - Live 0x0000000000000000\n" for m in dict.fromkeys(wanted) if m not in blocked]
    root.write("/proc/modules", "".join(lines))
    shutil.rmtree(root.host(f"{FAKE_STATE}/busy-modules"), ignore_errors=True)


def _mounts(root: HostRoot) -> None:
    mounts = ["/dev/sda1 / ext4 rw,relatime 0 0\n"]
    if root.exists("/etc/fstab"):
        for fields in (line.split() for line in root.read("/etc/fstab").splitlines()):
            if len(fields) >= 4 and not fields[0].startswith("#") and "bind" in fields[3]:
                mounts.append(f"{fields[0]} {fields[1]} none rw,bind 0 0\n")
    root.write("/proc/mounts", "".join(mounts))


def _units(root: HostRoot) -> None:
    shutil.rmtree(root.host("/run"), ignore_errors=True)
    os.makedirs(root.host("/run/fake-systemd"))
    wants = root.host("/etc/systemd/system/multi-user.target.wants")
    for unit in os.listdir(wants) if os.path.isdir(wants) else []:
        root.write(f"/run/fake-systemd/{unit}.state", "active\n")
    for dropins in _glob(root.host("/etc/systemd/system"), ".d"):
        unit = os.path.basename(dropins)[: -len(".d")]
        props = []
        for conf in sorted(_glob(dropins, ".conf")):
            with open(conf, encoding="utf-8") as handle:
                props += [line for line in handle if re.match(r"^[A-Za-z]+=", line)]
        root.write(f"/run/fake-systemd/{unit}.props", "".join(props))
