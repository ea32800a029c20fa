"""Running the agent against a throwaway root, stage by stage, as the stage Job would.

It owns placing a package payload in the root's copy directory (as the copy container does), the
agent's environment (as the stage Job sets it), running ``python -m fleetwright.agent`` in fresh
PID, mount, UTS and IPC namespaces without the capabilities that act on the kernel (reboot,
modules, clock) where ``unshare`` and ``setpriv`` allow it, and the sequence of agent
invocations for a list of stages, a reboot interrupt included. It reports results; judging them
is the caller's job.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetwright.agent import config, interrupts
from fleetwright.agent.modes import CHECK_MODES, WORK_MODES
from fleetwright.packagetest import HostRootError
from fleetwright.packagetest.boot import simulate_reboot
from fleetwright.packagetest.hostroot import FAKE_STATE, HostRoot

PAYLOAD = "skyhook-package"
STAGES = (*WORK_MODES, "interrupt")
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
REBOOT_STARTED = "interrupt (before reboot)"
SANDBOX = ("unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts", "--ipc", "--")
# And without the capabilities that act on this machine's kernel whatever the root holds: a real
# root's own kexec, insmod or hwclock then fails with EPERM instead of loading a crash kernel,
# a module or setting the clock of the machine running the test.
DROP_CAPS = (
    *("setpriv", "--bounding-set", "-sys_boot,-sys_module,-sys_time,-sys_rawio"),
    *("--inh-caps=-all", "--"),
)


@dataclass(frozen=True)
class AgentRun:
    returncode: int
    output: str


@dataclass(frozen=True)
class StageInvocation:
    """One agent invocation. ``ok`` is whether it did what the stage needs: exit 0, or for the
    invocation that starts a reboot, that it called ``reboot`` (a real node goes down there, so
    the agent never reports success for it)."""

    mode: str
    result: AgentRun
    ok: bool


_sandbox: list[str] | None = None


def _works(prefix: list[str]) -> bool:
    try:
        return subprocess.run([*prefix, "true"], capture_output=True, check=False, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def sandbox_prefix() -> list[str]:
    """Arguments for fresh PID/mount/UTS/IPC namespaces without the kernel-acting capabilities
    (``DROP_CAPS``), as much of that as this machine allows ([] where unshare is refused)."""
    global _sandbox  # noqa: PLW0603 - probe once per process
    if _sandbox is None:
        candidates: list[list[str]] = [[*SANDBOX, *DROP_CAPS], list(SANDBOX), list(DROP_CAPS), []]
        _sandbox = next(prefix for prefix in candidates if not prefix or _works(prefix))
    return list(_sandbox)


def drops_capabilities() -> bool:
    """Whether the agent runs without ``DROP_CAPS``' capabilities (a real root requires it)."""
    return "setpriv" in sandbox_prefix()


def payload_dir(directory: str) -> str:
    """``DIR/skyhook-package`` for a catalog directory, else ``DIR`` itself."""
    nested = os.path.join(directory, PAYLOAD)
    return nested if os.path.isdir(nested) else directory


def install_payload(
    root: HostRoot, payload: str, copy_dir: str, configmaps: Mapping[str, str] | None = None
) -> str:
    """Copy a package payload (``.../skyhook-package``) to ``copy_dir`` as the copy container does."""
    target = root.host(copy_dir)
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(payload):
        if name.startswith("."):  # the copy container's shell glob skips top-level dot-files
            continue
        source = os.path.join(payload, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(target, name), dirs_exist_ok=True, symlinks=True)
        else:
            shutil.copy2(source, os.path.join(target, name))
    for key, text in (configmaps or {}).items():
        root.write(f"{copy_dir}/configmaps/{key}", text)
    return target


def package_key(package_name: str) -> str:
    """The NodeProfile package key for a ``config.json`` name: a DNS label, ``_`` as ``-``.

    The key is field 2 of ``SKYHOOK_RESOURCE_ID``, whose fields are separated by ``_``; catalog
    names such as ``nvidia_setup`` are published under keys such as ``nvidia-setup``.
    """
    return re.sub(r"[^a-z0-9-]+", "-", package_name.lower()).strip("-") or "package"


def agent_env(key: str, version: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The stage Job's environment for the package ``key`` (a NodeProfile package key)."""
    env = {
        "PATH": CLEAN_PATH,
        "SKYHOOK_RESOURCE_ID": f"test-0000-1_{key}_{version}",
        "SKYHOOK_ROOT_DIR": "/var/lib/skyhook/test",
        "SKYHOOK_LOG_DIR": "/var/log/skyhook/test",
        "SKYHOOK_NODE_ORDER": "0",
        "COPY_RESOLV": "false",
        "FLEETWRIGHT_REBOOT_WAIT_SECONDS": "0.2",
    }
    env.update(extra or {})
    return env


def run_agent(args: Sequence[str], env: Mapping[str, str], *, timeout: float = 120) -> AgentRun:
    """Run ``python -m fleetwright.agent`` with ``args`` (the root mount argument included)."""
    proc = subprocess.run(
        [*sandbox_prefix(), sys.executable, "-m", "fleetwright.agent", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return AgentRun(proc.returncode, proc.stdout + proc.stderr)


def invocations(stage: str) -> list[str]:
    """Agent modes for one orchestrator stage: ``apply`` → apply, apply-check; a mode → itself."""
    if stage in WORK_MODES:
        return [stage, f"{stage}-check"]
    if stage in CHECK_MODES or stage == "interrupt":
        return [stage]
    raise ValueError(f"a stage must be one of {', '.join(STAGES + CHECK_MODES)}, got {stage!r}")


def _reboots(root: HostRoot) -> int:
    """How many reboots the fake ``reboot`` accepted (a refused one does not count)."""
    path = f"{FAKE_STATE}/reboot-requested"
    return len(root.read(path).splitlines()) if root.exists(path) else 0


def _start_reboot(root: HostRoot, args: Sequence[str], env: Mapping[str, str]) -> StageInvocation:
    """The interrupt invocation that calls ``reboot``, then the simulated reboot if it was accepted."""
    before = _reboots(root)
    result = run_agent(args, env)
    requested = _reboots(root) > before
    if requested:
        simulate_reboot(root)
    return StageInvocation(REBOOT_STARTED, result, requested)


def run_stages(
    root: HostRoot,
    directory: str,
    stages: Sequence[str],
    *,
    configmaps: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    interrupt: interrupts.InterruptRequest | None = None,
    key: str | None = None,
) -> list[StageInvocation]:
    """Install the package in ``root`` and run ``stages`` in order; stop at the first failure.

    ``key`` is the NodeProfile package key (default: ``package_key`` of the package's name). A
    reboot interrupt is followed by a simulated reboot and the restarted interrupt invocation,
    which is how a reboot completes on a real node.
    """
    if root.flavour().real and not drops_capabilities():
        raise HostRootError(
            "a real root runs the distribution's own binaries: it needs setpriv (util-linux) to drop "
            "the capabilities that act on this machine's kernel, and setpriv does not run here"
        )
    payload = payload_dir(directory)
    cfg = config.load(payload)
    key = key or package_key(cfg.package_name)
    copy_dir = f"/var/lib/skyhook/test/{key}-{cfg.package_version}-local-1"
    install_payload(root, payload, copy_dir, configmaps)
    environment = agent_env(key, cfg.package_version, env)
    runs: list[StageInvocation] = []
    for stage in stages:
        for mode in invocations(stage):
            args = [mode, root.path, copy_dir]
            if mode == "interrupt":
                chosen = interrupt or interrupts.InterruptRequest(interrupts.NO_OP)
                args.append(interrupts.encode(chosen))
                if chosen.type == interrupts.NODE_RESTART:
                    runs.append(_start_reboot(root, args, environment))
                    if not runs[-1].ok:
                        return runs
            result = run_agent(args, environment)
            runs.append(StageInvocation(mode, result, result.returncode == 0))
            if not runs[-1].ok:
                return runs
    return runs
