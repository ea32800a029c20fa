"""Runs one step of ``config.json`` (docs/package-format.md §9): arguments, environment, chroot,
return codes.

Every step runs in the host's chroot, ``on_host: false`` included (``config`` warns that it is
ignored): NodeWright's production agent does the same, and packages rely on the host's tools.

It owns ``env:VAR`` substitution, the environment layering (reserved ``STEP_ROOT``/``SKYHOOK_DIR``
always win), the exec-bit fix-up, the per-step header and result lines. It does not decide
whether a step runs (flags, SIGTERM): ``run`` does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from fleetwright.agent import executor, logs
from fleetwright.agent.config import ScriptStep
from fleetwright.agent.modes import UPGRADE_MODES
from fleetwright.agent.settings import HostPaths

ENV_PREFIX = "env:"


class StepError(Exception):
    pass


@dataclass(frozen=True)
class Versions:
    previous: str
    current: str


def substitute(arguments: tuple[str, ...], env: Mapping[str, str]) -> list[str]:
    """Replace every ``env:NAME`` argument by ``env[NAME]``; report all missing names at once."""
    names = [a[len(ENV_PREFIX) :] for a in arguments if a.startswith(ENV_PREFIX)]
    missing = [n for n in names if n not in env]
    if missing:
        raise StepError(f"arguments name unset environment variable(s): {', '.join(missing)}")
    return [env[a[len(ENV_PREFIX) :]] if a.startswith(ENV_PREFIX) else a for a in arguments]


def step_env(
    base: Mapping[str, str], step: ScriptStep, mode: str, versions: Versions, paths: HostPaths
) -> dict[str, str]:
    env = dict(base)
    env.update(step.env)
    if mode in UPGRADE_MODES:
        env["CURRENT_VERSION"] = versions.current
        env["PREVIOUS_VERSION"] = versions.previous
    env["STEP_ROOT"] = os.path.join(paths.copy_dir, "skyhook_dir")
    env["SKYHOOK_DIR"] = paths.copy_dir
    return env


def _make_executable(path: str) -> None:
    mode = os.stat(path).st_mode
    # Ordinary permission bits only: never carry set-id or sticky bits onto a host script.
    # Adding u+x,g+x,o+x is deliberate: packages need not set exec bits (docs/package-format.md §9.2).
    os.chmod(path, stat.S_IMODE(mode) & 0o777 | 0o111)  # noqa: S103


def argv_for(
    step: ScriptStep, mode: str, versions: Versions, env: Mapping[str, str], paths: HostPaths
) -> list[str]:
    argv = [os.path.join(paths.copy_dir, "skyhook_dir", step.path), *substitute(step.arguments, env)]
    if step.upgrade_step and mode in UPGRADE_MODES:
        argv += [versions.previous, versions.current]
    return argv


def run(
    step: ScriptStep,
    mode: str,
    *,
    paths: HostPaths,
    package: tuple[str, str],
    versions: Versions,
    base_env: Mapping[str, str],
) -> bool:
    """Run ``step`` and return whether its exit code is allowed. Never raises for step failures."""
    name, version = package
    logs.say(
        f"step {step.name}: mode={mode} path={step.path} arguments={list(step.arguments)} "
        f"returncodes={list(step.returncodes)} idempotence={step.idempotence} on_host={step.on_host}"
    )
    try:
        argv = argv_for(step, mode, versions, base_env, paths)
    except StepError as exc:
        logs.error(f"FAILED: {step.path}: {exc}")
        return False
    _make_executable(os.path.join(paths.package_dir, "skyhook_dir", step.path))
    base = None
    if paths.settings.write_logs:
        base = logs.step_log_base(paths.logs, name, version, step.path)
    result = executor.run(
        argv,
        root=paths.root,
        cwd=paths.copy_dir,
        env=step_env(base_env, step, mode, versions, paths),
        log_base=base,
    )
    if result.returncode is not None and result.returncode in step.returncodes:
        logs.say(f"SUCCEEDED: {step.path} exit code {result.returncode}")
        return True
    reason = result.error or (
        f"exit code {result.returncode} is not an allowed return code {list(step.returncodes)}"
    )
    logs.error(f"FAILED: {step.path}: {reason}")
    return False
