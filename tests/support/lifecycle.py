"""The catalog's packages through their whole life on a root, as a node goes through it.

A lifecycle is the install (apply, config, the package's interrupt, post-interrupt), a config
change (config again with other configMaps, the interrupt, post-interrupt), the upgrade where the
package has that mode, and the uninstall, each stage with its checks. ``LIFECYCLES`` holds what
each catalog package needs for it (configMaps, the interrupt its NodeProfile pairs it with, what
the root must hold first), ``run`` plays one on a root and reports each phase. The real-root test
(tests/integration/test_package_real_root.py) and ``bench/package_roots.py`` share them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleetwright.agent import config, interrupts
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import package_key, payload_dir, run_stages

CATALOG = Path(__file__).resolve().parents[2] / "packages"
REBOOT = interrupts.InterruptRequest(interrupts.NODE_RESTART)
NOOP = interrupts.InterruptRequest(interrupts.NO_OP)
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def in_root(root: HostRoot, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a chroot of ``root`` (test preparation, not a package step)."""
    return subprocess.run(
        list(argv),
        preexec_fn=lambda: os.chroot(root.path),
        env={"PATH": CLEAN_PATH, "DEBIAN_FRONTEND": "noninteractive"},
        capture_output=True,
        text=True,
        check=False,
    )


def driver_repository(root: HostRoot, version: str = "550") -> None:
    """A vendor apt repository on a real root, as GPU nodes have their vendor's: one
    ``gpu-driver-<version>`` package (its tools under /usr/local/gpu) in a flat ``file:``
    repository, the lists updated from it alone. A fake root needs none (its apt records)."""
    if not root.flavour().real:
        return
    name = f"gpu-driver-{version}"
    repo = root.host("/opt/gpu-repo")
    with tempfile.TemporaryDirectory() as work:
        tree = Path(work, name)
        (tree / "DEBIAN").mkdir(parents=True)
        control = (
            f"Package: {name}\nVersion: {version}.0-1\nArchitecture: all\n"
            "Maintainer: fleetwright tests <tests@fleetwright.invalid>\n"
            f"Description: GPU driver {version} (test package)\n"
        )
        (tree / "DEBIAN" / "control").write_text(control)
        tool = tree / "usr/local/gpu/bin/gpu-smi"
        tool.parent.mkdir(parents=True)
        tool.write_text(f"#!/bin/sh\necho 'GPU driver {version}'\n")
        tool.chmod(0o755)
        (tree / "usr/local/gpu/lib64").mkdir(parents=True)
        os.makedirs(repo, exist_ok=True)
        deb = Path(repo, f"{name}_{version}.0-1_all.deb")
        build = ["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)]
        subprocess.run(build, check=True, capture_output=True)
    data = deb.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    entry = f"{control}Filename: ./{deb.name}\nSize: {len(data)}\nSHA256: {digest}\n"
    Path(repo, "Packages").write_text(entry)
    root.write("/etc/apt/sources.list.d/gpu-driver.list", "deb [trusted=yes] file:/opt/gpu-repo ./\n")
    only = ["-o", "Dir::Etc::SourceList=sources.list.d/gpu-driver.list", "-o", "Dir::Etc::SourceParts=-"]
    updated = in_root(root, "apt-get", "update", *only, "-o", "APT::Get::List-Cleanup=0")
    assert updated.returncode == 0, updated.stdout + updated.stderr


def _data_directories(root: HostRoot) -> None:
    for directory in ("/data/nvme", "/data/models"):
        os.makedirs(root.host(directory), exist_ok=True)


def _script(word: str) -> dict[str, str]:
    return {
        f"{word}.sh": f'#!/bin/bash\necho "$1 on $SKYHOOK_RESOURCE_ID" > /etc/{word}.done\n',
        f"{word}_check.sh": f'#!/bin/bash\ngrep -q "^{word} on " /etc/{word}.done\n',
    }


SHELLSCRIPT = {
    k: v for word in ("apply", "config", "post_interrupt", "uninstall") for k, v in _script(word).items()
}


@dataclass(frozen=True)
class Lifecycle:
    """One catalog package's life. ``installs_os_packages``: on the distributions it names, its
    install goes through the host's package manager (so only a real root tests it)."""

    package: str
    install: Mapping[str, str]
    change: Mapping[str, str] | None
    interrupt: interrupts.InterruptRequest = NOOP
    flavours: tuple[str, ...] = ("debian", "debian-real")
    installs_os_packages: bool = False
    prepare: Callable[[HostRoot], None] = field(default=lambda root: None)


LIFECYCLES = {
    lc.package: lc
    for lc in (
        Lifecycle(
            "shellscript", SHELLSCRIPT, SHELLSCRIPT, flavours=("debian", "debian-real", "al2023", "cos")
        ),
        Lifecycle(
            "tuning",
            {"sysctl.conf": "vm.swappiness = 10\n", "grub.conf": "iommu=pt\n"},
            {"sysctl.conf": "vm.swappiness = 5\n", "grub.conf": "iommu=pt\npci=realloc=off\n"},
            REBOOT,
        ),
        Lifecycle(
            "kdump", {"crashkernel": "512M\n"}, {"crashkernel": "768M\n"}, REBOOT, installs_os_packages=True
        ),
        Lifecycle(
            "bind-mount",
            {"mounts": "/data/nvme /var/lib/scratch\n"},
            {"mounts": "/data/nvme /var/lib/scratch\n/data/models /opt/models\n"},
            prepare=_data_directories,
        ),
        Lifecycle("kmod-mitigation", {"modules": "tipc\n"}, {"modules": "tipc\nsctp\n"}),
        Lifecycle(
            "gke-cos-tuning",
            {"sysctl.conf": "net.core.somaxconn = 32768\n"},
            {"sysctl.conf": "net.core.somaxconn = 65535\n"},
            interrupts.InterruptRequest(interrupts.SERVICE_RESTART, ("containerd.service",)),
            flavours=("cos",),
        ),
        Lifecycle(
            "gpu-node-tuning",
            {},
            {"sysctl.conf": "vm.swappiness = 1\n"},
            REBOOT,
            flavours=("debian", "debian-real", "al2023"),
        ),
        Lifecycle("gpu-health", {}, {"dcgm_diag_level": "2\n"}, flavours=("debian", "debian-real", "al2023")),
        Lifecycle(
            "gpu-driver-setup",
            {"driver_version": "550\n"},
            None,
            REBOOT,
            flavours=("debian", "debian-real", "al2023"),
            installs_os_packages=True,
            prepare=driver_repository,
        ),
    )
}
# eks-gpu-setup downloads its EFA installer from a server its unit test serves
# (tests/unit/test_package_eks_gpu_setup.py); it has no lifecycle here.
NOT_HERE = {"eks-gpu-setup": "needs the EFA installer server of its unit test (AL2023 only)"}


@dataclass(frozen=True)
class PhaseResult:
    phase: str
    ok: bool
    failed_at: str
    """The agent mode that failed ("" when the phase passed or was not run)."""
    output: str
    ran: bool = True
    passed: tuple[str, ...] = ()
    """The agent modes that passed, in order (``interrupt (before reboot)`` included)."""


def phases(lifecycle: Lifecycle) -> list[tuple[str, list[str], Mapping[str, str]]]:
    """(phase, stages, configMaps) of ``lifecycle``, from the modes its ``config.json`` has."""
    modes = set(config.load(payload_dir(str(CATALOG / lifecycle.package))).modes)
    restart = ["interrupt", "post-interrupt"] if lifecycle.interrupt.type != interrupts.NO_OP else []
    apply_config = [stage for stage in ("apply", "config") if stage in modes]
    out: list[tuple[str, list[str], Mapping[str, str]]] = [
        ("install", [*apply_config, *restart], lifecycle.install)
    ]
    if lifecycle.change is not None and "config" in modes:
        out.append(("config change", ["config", *restart], lifecycle.change))
    if "upgrade" in modes:
        out.append(("upgrade", ["upgrade"], lifecycle.change or lifecycle.install))
    out.append(("uninstall", ["uninstall"], lifecycle.change or lifecycle.install))
    return out


def run(root: HostRoot, lifecycle: Lifecycle) -> list[PhaseResult]:
    """Play ``lifecycle`` on ``root``; a failed phase ends it (the later ones are not run)."""
    lifecycle.prepare(root)
    directory = str(CATALOG / lifecycle.package)
    cfg = config.load(payload_dir(directory))
    results: list[PhaseResult] = []
    for generation, (phase, stages, maps) in enumerate(phases(lifecycle), start=1):
        if results and not results[-1].ok:
            results.append(PhaseResult(phase, False, "", "", ran=False))
            continue
        # Each phase is a new generation of the NodeProfile, as a changed profile is on a node:
        # the agent's flags of the earlier one do not hold its interrupt back.
        rid = f"test-0000-{generation}_{package_key(cfg.package_name)}_{cfg.package_version}"
        runs = run_stages(
            root,
            directory,
            stages,
            configmaps=maps,
            interrupt=lifecycle.interrupt,
            env={"SKYHOOK_RESOURCE_ID": rid},
        )
        failed = next((r for r in runs if not r.ok), None)
        passed = tuple(r.mode for r in runs if r.ok)
        if failed is None:
            results.append(PhaseResult(phase, True, "", runs[-1].result.output, passed=passed))
        else:
            results.append(PhaseResult(phase, False, failed.mode, failed.result.output, passed=passed))
    return results
