"""One agent invocation from parsed arguments to exit code (docs/package-format.md §8).

It owns the order of operations: legacy self-copy, interrupt dispatch, loading ``config.json``,
expected config files, the ``root_dir/`` overlay, START marker, stepping through a work mode (stop at
the first failure, honour flags) or a check mode (run all, summarise), and the history update.
Nothing on the host changes before ``config.json`` and the expected config files are valid.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from fleetwright.agent import config, interrupts, logs, overlay, signals, state, steps
from fleetwright.agent.modes import (
    CHECK_MODES,
    FLAG_SKIP_MODES,
    HISTORY_MODES,
    INTERRUPT,
    UNINSTALL_MODES,
    UPGRADE_MODES,
    is_check,
)
from fleetwright.agent.settings import HostPaths, Settings

OK, FAILED = 0, 1
TERMINATION_LOG = "/dev/termination-log"
"""Where the kubelet reads a container's termination message (the pod's default path)."""


@dataclass(frozen=True)
class Invocation:
    mode: str
    root: str
    copy_dir: str
    interrupt_data: str | None = None


def _self_copy(paths: HostPaths) -> None:
    """Legacy: without an orchestrator copy step, copy the baked-in payload to the copy directory."""
    source = paths.settings.data_dir
    if os.path.isdir(paths.package_dir) or not os.path.isdir(source):
        return
    logs.warn(f"{paths.copy_dir} does not exist; copying {source} into it (legacy self-copy)")
    shutil.copytree(source, paths.package_dir)
    node_files = "/etc/nvidia-bootstrap/node-files"
    if os.path.isdir(node_files):
        shutil.copytree(node_files, paths.package_dir, dirs_exist_ok=True)


def _missing_config_files(paths: HostPaths, cfg: config.PackageConfig) -> list[str]:
    configmaps = os.path.join(paths.package_dir, "configmaps")
    return [name for name in cfg.expected_config_files if not os.path.isfile(os.path.join(configmaps, name))]


class _Stage:
    """The steps of one mode against one host, with the state they read and write."""

    def __init__(self, inv: Invocation, paths: HostPaths, cfg: config.PackageConfig, env: Mapping[str, str]):
        self.inv, self.paths, self.cfg, self.env = inv, paths, cfg, env
        self.flag_dir = paths.step_flags(cfg.package_name, cfg.package_version)
        self.history = paths.history_file(cfg.package_name)

    def versions(self) -> steps.Versions:
        previous = state.current_version(self.history) if self.inv.mode in UPGRADE_MODES else ""
        return steps.Versions(previous=previous, current=self.cfg.package_version)

    def run_one(self, step: config.ScriptStep) -> bool:
        return steps.run(
            step,
            self.inv.mode,
            paths=self.paths,
            package=(self.cfg.package_name, self.cfg.package_version),
            versions=self.versions(),
            base_env=self.env,
        )

    def skip_by_flag(self, step: config.ScriptStep, flag: str) -> bool:
        if self.inv.mode not in FLAG_SKIP_MODES or step.idempotence or not os.path.exists(flag):
            return False
        if self.paths.settings.always_run_step:
            logs.warn(f"OVERLAY_ALWAYS_RUN_STEP=true: running {step.path} despite its flag")
            return False
        logs.say(f"SKIPPED: {step.path} already ran for {self.cfg.package_version} (flag {flag})")
        return True

    def work(self) -> bool:
        for step in self.cfg.steps(self.inv.mode):
            if signals.stop_requested():
                logs.error(f"SIGTERM received: not starting {step.path}")
                return False
            flag = state.flag_path(self.flag_dir, step.path, step.arguments, step.returncodes)
            if self.skip_by_flag(step, flag):
                continue
            if not self.run_one(step):
                return False
            state.write_flag(flag, step.idempotence)
        return True

    def check(self) -> bool:
        checks = self.cfg.steps(self.inv.mode)
        results: list[tuple[str, bool]] = []
        for step in checks:
            if signals.stop_requested():
                logs.error(f"SIGTERM received: not starting {step.path}")
                break
            results.append((step.path, self.run_one(step)))
        state.write_check_results(self.paths.flags, results)
        failed = [path for path, passed in results if not passed]
        # A run cut short (fewer results than steps) fails even if every result passed.
        passed = not failed and len(results) == len(checks)
        logs.say(f"{self.inv.mode}: {len(results) - len(failed)}/{len(checks)} checks passed")
        if failed:
            logs.error(f"{self.inv.mode} failed: {', '.join(failed)}")
        return passed

    def finish_check(self) -> None:
        mode = self.inv.mode
        state.touch(os.path.join(self.paths.flags, f"{mode}_ALL_CHECKED"))
        if mode not in HISTORY_MODES:
            return
        if mode == "uninstall-check":
            state.record_version(self.history, state.UNINSTALLED)
            state.clear_flags(self.flag_dir)
        else:
            state.record_version(self.history, self.cfg.package_version)


def _run_steps(inv: Invocation, paths: HostPaths, env: Mapping[str, str]) -> int:
    try:
        cfg = config.load(paths.package_dir)
    except config.ConfigError as exc:
        for path, message in exc.errors:
            logs.error(f"config.json invalid: {path}: {message}")
        return FAILED
    for warning in cfg.warnings:
        logs.warn(warning)
    preflight = paths.settings.preflight and is_check(inv.mode)
    if inv.mode not in UNINSTALL_MODES:
        missing = _missing_config_files(paths, cfg)
        if missing:
            logs.error(f"expected_config_files missing from configmaps/: {', '.join(missing)}")
            return FAILED
        if not preflight:  # a preflight changes nothing on the node in service
            overlay.apply(paths.root, paths.copy_dir)
    state.touch(os.path.join(paths.flags, "START"))
    stage = _Stage(inv, paths, cfg, env)
    if not cfg.steps(inv.mode):
        return _no_steps(stage, preflight)
    if not is_check(inv.mode):
        return OK if stage.work() else FAILED
    if not stage.check():
        return FAILED
    stage.finish_check()
    return OK


def _no_steps(stage: _Stage, preflight: bool) -> int:
    """A mode without steps is a successful no-op (its work mode has none either: §6), also in a
    preflight while the package has checks on the same side (install or uninstall); a package
    with none there proves nothing before its work ran: its preflight fails, saying why in the
    pod's termination message (the stage's failure, hence the node's status, shows it)."""
    mode = stage.inv.mode
    side = [c for c in CHECK_MODES if (c in UNINSTALL_MODES) == (mode in UNINSTALL_MODES)]
    if not preflight or any(stage.cfg.steps(check) for check in side):
        logs.warn(f"{stage.cfg.package_name} defines no steps for {mode}: successful no-op")
        if is_check(mode):
            stage.finish_check()
        return OK
    message = f"{stage.cfg.package_name} defines no check step a preflight of {mode} can run"
    logs.error(message)
    if os.path.exists(TERMINATION_LOG):
        with open(TERMINATION_LOG, "w") as out:
            out.write(message)
    return FAILED


def _banner(inv: Invocation, paths: HostPaths) -> None:
    s = paths.settings
    logs.say("-" * 60)
    logs.say(f"fleetwright agent: mode={inv.mode} root={inv.root} copy_dir={inv.copy_dir}")
    rid = s.resource_id.raw if s.resource_id else "-"
    logs.say(f"interrupt_data={inv.interrupt_data or '-'} resource_id={rid}")
    logs.say(f"state_root={s.state_root} log_root={s.log_root} write_logs={s.write_logs}")
    logs.say(f"always_run_step={s.always_run_step} flags={paths.flags}")
    logs.say("-" * 60)


def execute(inv: Invocation, settings: Settings, env: Mapping[str, str]) -> int:
    paths = HostPaths(root=inv.root, copy_dir=inv.copy_dir, settings=settings)
    _banner(inv, paths)
    if settings.copy_resolv_requested:
        logs.warn("COPY_RESOLV=true is ignored: the agent never overwrites the host's resolv.conf")
    _self_copy(paths)
    if inv.mode == INTERRUPT:
        return _run_interrupt(inv, paths, env)
    if settings.resource_id is None:
        logs.warn("SKYHOOK_RESOURCE_ID is not set; scripts that read it will not find it")
    try:
        return _run_steps(inv, paths, env)
    except (OSError, overlay.OverlayError) as exc:
        logs.error(f"{inv.mode} failed: {exc}")
        return FAILED


def _run_interrupt(inv: Invocation, paths: HostPaths, env: Mapping[str, str]) -> int:
    rid = paths.settings.resource_id
    if rid is None:
        logs.error("interrupt mode needs SKYHOOK_RESOURCE_ID (<cr>-<uid>-<generation>_<package>_<version>)")
        return FAILED
    try:
        interrupt = interrupts.decode(inv.interrupt_data or "")
        return OK if interrupts.run(paths, rid, interrupt, env) else FAILED
    except (OSError, interrupts.InterruptError) as exc:
        logs.error(f"interrupt failed: {exc}")
        return FAILED
