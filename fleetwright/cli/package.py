"""``fleetwright package lint DIR`` and ``fleetwright package test DIR --mode M``: package tooling.

``lint`` runs the agent's own ``config.json`` validation plus the catalog rules (referenced scripts
exist, are executable and have a shebang; every work mode has checks; a catalog directory has a
Dockerfile building ``/skyhook-package`` and a README). ``test`` runs the real agent against a
throwaway busybox/bash-static root filesystem, stage by stage, exactly as the stage Job would.
It owns reporting only: validation lives in ``fleetwright.agent.config`` and the test root in
``fleetwright.agent.testroot`` (the CLI may import the agent; never the other way round).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from fleetwright.agent import config, interrupts, testroot
from fleetwright.agent.modes import CHECK_MODES, WORK_MODES
from fleetwright.cli.app import app

package_app = typer.Typer(help="Lint and test NodeWright-compatible packages.", no_args_is_help=True)
app.add_typer(package_app, name="package")

PAYLOAD = "skyhook-package"
STAGES = (*WORK_MODES, "interrupt")
# The CR spelling (what users write in a NodeProfile) mapped to the agent's interrupt type.
INTERRUPT_TYPES = {
    "reboot": interrupts.NODE_RESTART,
    "service": interrupts.SERVICE_RESTART,
    "restartAllServices": interrupts.RESTART_ALL,
    "noop": interrupts.NO_OP,
}


@dataclass
class LintReport:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def payload_dir(directory: str) -> str:
    """``DIR/skyhook-package`` for a catalog directory, else ``DIR`` itself."""
    nested = os.path.join(directory, PAYLOAD)
    return nested if os.path.isdir(nested) else directory


def _lint_scripts(payload: str, cfg: config.PackageConfig, report: LintReport) -> None:
    skyhook_dir = os.path.join(payload, "skyhook_dir")
    for mode, steps in cfg.modes.items():
        for i, step in enumerate(steps):
            path = os.path.join(skyhook_dir, step.path)
            if not os.access(path, os.X_OK):
                report.errors.append(f"modes.{mode}[{i}].path: skyhook_dir/{step.path} is not executable")
            with open(path, "rb") as handle:
                if handle.read(2) != b"#!":
                    report.errors.append(f"modes.{mode}[{i}].path: skyhook_dir/{step.path} has no #! line")
    for dirpath, _, filenames in os.walk(skyhook_dir):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if name.endswith(".sh") and not os.access(path, os.X_OK):
                report.errors.append(f"{os.path.relpath(path, payload)}: .sh file is not executable")


def _lint_catalog(directory: str, report: LintReport) -> None:
    dockerfile = os.path.join(directory, "Dockerfile")
    if not os.path.isfile(dockerfile):
        report.errors.append("Dockerfile: missing (a catalog package is built from one)")
    else:
        text = Path(dockerfile).read_text(encoding="utf-8")
        if "/skyhook-package" not in text:
            report.errors.append("Dockerfile: must copy the payload to /skyhook-package")
        if not any(line.strip().upper().startswith("FROM ") for line in text.splitlines()):
            report.errors.append("Dockerfile: has no FROM line")
    if not os.path.isfile(os.path.join(directory, "README.md")):
        report.errors.append("README.md: missing")


def lint(directory: str) -> LintReport:
    report = LintReport()
    payload = payload_dir(directory)
    try:
        cfg = config.load(payload)
    except config.ConfigError as exc:
        report.errors += [f"{path}: {message}" for path, message in exc.errors]
        cfg = None
    if cfg is not None:
        report.warnings += list(cfg.warnings)
        _lint_scripts(payload, cfg, report)
        for i, name in enumerate(cfg.expected_config_files):
            if "/" in name or not name:
                report.errors.append(f"expected_config_files[{i}]: must be a plain file name, got {name!r}")
    if payload != directory:
        _lint_catalog(directory, report)
    return report


def invocations(stage: str) -> list[str]:
    """Agent modes for one orchestrator stage: ``apply`` → apply, apply-check; a mode → itself."""
    if stage in WORK_MODES:
        return [stage, f"{stage}-check"]
    if stage in CHECK_MODES or stage == "interrupt":
        return [stage]
    raise typer.BadParameter(f"--mode must be one of {', '.join(STAGES + CHECK_MODES)}, got {stage!r}")


@dataclass(frozen=True)
class StageRun:
    mode: str
    result: testroot.AgentRun


def run_stages(
    host: testroot.TestRoot,
    directory: str,
    stages: Sequence[str],
    *,
    configmaps: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    interrupt: interrupts.Interrupt | None = None,
) -> list[StageRun]:
    """Install the package in ``host`` and run ``stages`` in order; stop at the first failure.

    A reboot interrupt is followed by a simulated reboot and the restarted interrupt invocation,
    which is how a reboot completes on a real node.
    """
    payload = payload_dir(directory)
    cfg = config.load(payload)
    copy_dir = f"/var/lib/skyhook/test/{cfg.package_name}-{cfg.package_version}-local-1"
    host.install_payload(payload, copy_dir, configmaps)
    agent_env = host.agent_env(cfg.package_name, cfg.package_version, env)
    runs: list[StageRun] = []
    for stage in stages:
        for mode in invocations(stage):
            args = [mode, host.path, copy_dir]
            if mode == "interrupt":
                chosen = interrupt or interrupts.Interrupt(interrupts.NO_OP)
                args.append(interrupts.encode(chosen))
                if chosen.type == interrupts.NODE_RESTART:
                    runs.append(StageRun("interrupt (before reboot)", host.run_agent(args, agent_env)))
                    host.simulate_reboot()
            runs.append(StageRun(mode, host.run_agent(args, agent_env)))
            if runs[-1].result.returncode != 0:
                return runs
    return runs


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{option} takes KEY=VALUE, got {value!r}")
        out[key] = rest
    return out


@package_app.command("lint")
def package_lint_command(
    directory: Annotated[Path, typer.Argument(help="Package directory or payload.")],
) -> None:
    """Check config.json, referenced scripts and the catalog layout; exit 1 on any error."""
    report = lint(str(directory))
    for warning in report.warnings:
        typer.echo(f"warning: {warning}")
    for error in report.errors:
        typer.echo(f"error: {directory}: {error}", err=True)
    if report.errors:
        raise typer.Exit(1)
    typer.echo(f"{directory}: ok")


@package_app.command("test")
def package_test_command(
    directory: Annotated[Path, typer.Argument(help="Package directory or payload.")],
    *,
    mode: Annotated[
        list[str], typer.Option("--mode", "-m", help="Stage or agent mode; repeat for a sequence.")
    ],
    configmap: Annotated[
        list[str] | None, typer.Option("--configmap", help="KEY=FILE placed in configmaps/KEY.")
    ] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="KEY=VALUE for the agent.")] = None,
    interrupt: Annotated[str, typer.Option(help="reboot, service, restartAllServices or noop.")] = "noop",
    service: Annotated[list[str] | None, typer.Option(help="Unit for a service interrupt.")] = None,
    os_release: Annotated[
        str, typer.Option("--os", help="Test root flavour: debian, cos or al2023.")
    ] = "debian",
    keep: Annotated[bool, typer.Option(help="Keep the test root and print its path.")] = False,
) -> None:
    """Run the agent for each --mode against a throwaway root filesystem (needs root)."""
    if interrupt not in INTERRUPT_TYPES:
        raise typer.BadParameter(f"--interrupt must be one of {', '.join(INTERRUPT_TYPES)}")
    files = _pairs(configmap or [], "--configmap")
    maps = {key: Path(path).read_text(encoding="utf-8") for key, path in files.items()}
    chosen = interrupts.Interrupt(INTERRUPT_TYPES[interrupt], tuple(service or ()))
    workdir = tempfile.mkdtemp(prefix="fleetwright-package-test-")
    try:
        host = testroot.build(os.path.join(workdir, "root"), os_release=os_release)
        runs = run_stages(
            host, str(directory), mode, configmaps=maps, env=_pairs(env or [], "--env"), interrupt=chosen
        )
    except (testroot.TestRootError, config.ConfigError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    for run in runs:
        typer.echo(f"=== {run.mode}: exit {run.result.returncode}")
        typer.echo(run.result.output.rstrip())
    if keep:
        typer.echo(f"test root kept at {workdir}/root")
    if any(run.result.returncode != 0 for run in runs):
        raise typer.Exit(1)
