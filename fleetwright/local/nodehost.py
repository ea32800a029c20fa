"""What the real node needs of the test machine and leaves on it: the tools, binaries, privileges
and cgroups it requires, the machine's kernel parameters and the host default paths it must not
touch (the tier checks both are unchanged), and its cgroup root in every hierarchy (made on
start, removed on stop, and removed for a node whose launcher was killed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from fleetwright.binaries import MissingBinaryError, control_plane_binary
from fleetwright.local import nodeconfig

CGROUP_FS = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "fleetwright-node-"


def requirements() -> list[str]:
    """What this machine lacks to run a real node (empty when it can)."""
    missing = []
    for tool in ("unshare", "nsenter", "ip", "mount"):
        if shutil.which(tool) is None:
            missing.append(f"the {tool} command")
    if not os.access(nodeconfig.RUNC, os.X_OK):
        missing.append(f"runc at {nodeconfig.RUNC} (Debian package runc)")
    if os.geteuid() != 0:
        missing.append("root (the node creates namespaces, mounts and cgroups)")
    if not (CGROUP_FS / "memory").is_dir() and not (CGROUP_FS / "cgroup.controllers").exists():
        missing.append("a cgroup hierarchy at /sys/fs/cgroup")
    for name in ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "pause"):
        try:
            control_plane_binary(name)
        except MissingBinaryError as error:
            missing.append(str(error))
    return missing


def kernel_parameters() -> dict[str, str]:
    """The machine's values of the kernel parameters a kubelet sets (read from the host)."""
    return {key: Path("/proc/sys", key).read_text().strip() for key in nodeconfig.KUBELET_SYSCTLS}


def host_defaults_present() -> list[str]:
    """Default paths of the kubelet, containerd and CNI that exist on the host (should be none)."""
    return [path for path in nodeconfig.HOST_DEFAULTS if os.path.lexists(path)]


def _cgroup_hierarchies(*types: str) -> list[Path]:
    """Every mounted cgroup hierarchy of these filesystem types (``cgroup`` is v1: one per
    controller plus name=systemd; ``cgroup2`` is the unified one, beside them in hybrid mode)."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] in types:
            out.append(Path(fields[1]))
    return out


def new_cgroup_root() -> str:
    """A cgroup root for a new node: the launcher's pid in the name, so that a later node removes
    what a killed launcher left (``make_cgroup_root``)."""
    return f"/{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"


def make_cgroup_root(cgroup_root: str) -> None:
    """``cgroup_root`` in every v1 hierarchy (its cpusets copied from the parent), after removing
    the roots of nodes whose launcher is gone."""
    _remove_stale_cgroups()
    for hierarchy in _cgroup_hierarchies("cgroup"):
        directory = hierarchy / cgroup_root.lstrip("/")
        directory.mkdir(exist_ok=True)
        if (hierarchy / "cpuset.cpus").exists():
            for name in ("cpuset.cpus", "cpuset.mems"):
                (directory / name).write_text((hierarchy / name).read_text())


def remove_cgroup_tree(cgroup_root: str) -> None:
    """rmdir, deepest first, in every hierarchy (runc also mirrors the pods' cgroups into the
    unified one of a hybrid host); the kernel refuses a cgroup that still has a process."""
    for hierarchy in _cgroup_hierarchies("cgroup", "cgroup2"):
        top = hierarchy / cgroup_root.lstrip("/")
        if top.exists():
            for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)


def _remove_stale_cgroups() -> None:
    """Cgroup roots of nodes whose launcher is gone (killed before it could clean up)."""
    for hierarchy in _cgroup_hierarchies("cgroup", "cgroup2"):
        for top in hierarchy.glob(f"{CGROUP_PREFIX}*"):
            owner = top.name.removeprefix(CGROUP_PREFIX).split("-")[0]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                remove_cgroup_tree("/" + top.name)


def cgroups_left(cgroup_root: str) -> list[str]:
    """Directories of ``cgroup_root`` still present in any hierarchy (none once a node stopped)."""
    return [
        str(hierarchy / cgroup_root.lstrip("/"))
        for hierarchy in _cgroup_hierarchies("cgroup", "cgroup2")
        if (hierarchy / cgroup_root.lstrip("/")).exists()
    ]
