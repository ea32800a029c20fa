"""The programs inside a throwaway root: a static shell, harmless busybox applets, the fake host tools.

It owns finding Debian's ``bash-static`` (installed as ``/bin/bash`` and ``/bin/sh``) and
``busybox-static`` (only the applets in ``SAFE_APPLETS`` are linked), and copying the fake host
tools (``sysctl``, ``systemctl``, ``reboot``, ``apt-get``, ...) from the ``fakes/`` directory shipped
with this package, where each script sits at the path it takes in the root; a distribution's own
tools (``apt``, ``dnf``, ``update-grub``, ...) only on roots of that flavour.

The shell is bash, not busybox ash, because Debian's ash runs its built-in applets *before*
searching PATH, which would bypass the fakes and call the real ``reboot(2)``; the dangerous
applets (reboot, mount, modprobe, kill, ...) are not linked for the same reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from fleetwright.packagetest import HostRootError
from fleetwright.packagetest.flavours import DISTRIBUTION_TOOLS, Flavour

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
BASH_CANDIDATES = ("/bin/bash-static", "/usr/bin/bash-static")
# No "sh"/"ash": the shell is bash-static (see the module docstring).
SAFE_APPLETS = (  # noqa: SIM905 - a word list reads better than 90 quoted strings
    "[ [[ awk base64 basename bunzip2 bzcat cat chgrp chmod chown cmp cp cpio cut date dd diff "
    "dirname du echo egrep env expand expr false fgrep find fold getopt grep gunzip gzip head hexdump "
    "id ln ls md5sum mkdir mkfifo mktemp more mv nl nproc od paste printf pwd readlink realpath rev rm "
    "rmdir sed seq sha1sum sha256sum sha512sum sleep sort stat strings tac tail tar tee test timeout "
    "touch tr true truncate uniq unlink unxz unzip wc wget which whoami xargs xxd xz xzcat yes zcat"
).split()
FAKES = Path(__file__).with_name("fakes")
# The fakes' shared helpers and payloads: not host tools, so never diverted.
FAKE_HELPERS = "/usr/lib/fake-host/"


def _find(candidates: tuple[str, ...], package: str) -> str:
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise HostRootError(
        f"{package} is required to build a test root filesystem: "
        f"install it with `apt-get install {package}` (Debian/Ubuntu)"
    )


def busybox() -> str:
    """Debian's static busybox (the catalog's package images are built on it too)."""
    return _find(BUSYBOX_CANDIDATES, "busybox-static")


def fake_tools() -> dict[str, Path]:
    """Every fake host tool and helper, by its absolute path inside a root."""
    return {"/" + str(p.relative_to(FAKES)): p for p in sorted(FAKES.rglob("*")) if p.is_file()}


def install(root: str, flavour: Flavour) -> None:
    """Give ``root`` its shell, its busybox applets, the fake host tools every distribution has
    and those of ``flavour`` (its package manager and boot loader tools, with their aliases)."""
    busybox_binary = busybox()
    bash = _find(BASH_CANDIDATES, "bash-static")
    for directory in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin"):
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    shutil.copy2(bash, os.path.join(root, "bin", "bash"))
    os.symlink("bash", os.path.join(root, "bin", "sh"))
    shutil.copy2(busybox_binary, os.path.join(root, "bin", "busybox"))
    for applet in SAFE_APPLETS:
        os.symlink("busybox", os.path.join(root, "bin", applet))
    os.symlink("../../bin/env", os.path.join(root, "usr", "bin", "env"))
    install_fakes(root, flavour)
    for alias, tool in flavour.aliases.items():
        os.symlink(tool, os.path.join(root, alias.lstrip("/")))


def fakes_for(flavour: Flavour) -> dict[str, Path]:
    """The fake tools and helpers a root of ``flavour`` gets, by their path inside it: every
    distribution's, plus this one's own; on a real root, not those it has for real."""
    return {
        inside: source
        for inside, source in fake_tools().items()
        if (inside not in DISTRIBUTION_TOOLS or inside in flavour.tools)
        and not any(inside == own or inside.startswith(own + "/") for own in flavour.own_tools)
    }


def diverted(flavour: Flavour) -> list[str]:
    """The paths a real root's package manager must never write: each fake host tool under both
    of its merged-/usr names (``/bin/mount`` and ``/usr/bin/mount``), since a package may ship
    either. ``dpkg-divert`` sends a package's copy to ``PATH.distrib`` and the fake stays."""
    paths: list[str] = []
    for inside in fakes_for(flavour):
        if inside.startswith(FAKE_HELPERS):
            continue
        short = inside.removeprefix("/usr")
        paths += [short, "/usr" + short]
    return sorted(set(paths))


def install_fakes(root: str, flavour: Flavour) -> None:
    """Copy the fake host tools of ``flavour`` into ``root``, replacing whatever is there (a real
    root's file at such a path was diverted when the root was built)."""
    for inside, source in fakes_for(flavour).items():
        target = os.path.join(root, inside.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.unlink(target)  # never write through a link of the root
        shutil.copyfile(source, target)
        os.chmod(target, 0o755)  # noqa: S103 - host tools are world-executable on any host


def verify_static(root: str) -> None:
    """Fail loudly, naming the fix, when the shell or busybox cannot run inside the chroot."""
    proc = subprocess.run(
        ["/bin/sh", "-c", "/bin/busybox true"],
        preexec_fn=lambda: os.chroot(root),
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise HostRootError(
            "bash-static or busybox-static does not run inside a chroot (dynamically linked?): "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
