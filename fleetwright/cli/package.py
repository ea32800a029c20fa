"""``fleetwright package lint DIR`` and ``fleetwright package test DIR --mode M``: package tooling.

``lint`` runs the agent's own ``config.json`` validation plus the catalog rules (referenced scripts
exist, are executable and have a shebang; every work mode has checks; a catalog directory has a
Dockerfile building ``/skyhook-package`` and a README). ``test`` runs the real agent against a
throwaway root filesystem (fakes on busybox/bash-static, or a real distribution root), stage by
stage, exactly as the stage Job would; a layered package (``FROM`` another package's image) is
assembled first, as the image build does. ``roots`` lists the roots. It owns reporting only:
validation lives in ``fleetwright.agent.config``, the roots and the stage runs in
``fleetwright.packagetest``, building real roots and assembling layers in ``fleetwright.images``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from fleetwright.agent import config, interrupts
from fleetwright.binaries import cache_dir
from fleetwright.cli.app import CommandGroup, app
from fleetwright.images import catalog, roots
from fleetwright.images.offline import ImageBuildError
from fleetwright.packagetest import HostRootError, hostroot, runner
from fleetwright.packagetest.flavours import FLAVOURS, Flavour

package_app = typer.Typer(
    cls=CommandGroup, help="Lint and test NodeWright-compatible packages.", no_args_is_help=True
)
app.add_typer(package_app, name="package")

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


def lint(directory: str, base: Path | None = None) -> LintReport:
    """Lint a package; a layered one's payload as its image holds it (its base's files first)."""
    if not catalog.layered(Path(directory)):
        return _lint(directory, runner.payload_dir(directory))
    with tempfile.TemporaryDirectory(prefix="fleetwright-package-lint-") as work:
        try:
            payload = assembled(directory, base, work)
        except (catalog.CatalogError, OSError) as exc:
            return LintReport(errors=[f"Dockerfile: {exc}"])
        return _lint(directory, payload)


def assembled(directory: str, base: Path | None, work: str) -> str:
    """The payload ``package test`` runs: a layered package's (``FROM`` another package's image)
    assembled under ``work`` as the image build does; else the directory's own."""
    if not catalog.layered(Path(directory)):
        if base is not None:
            raise catalog.CatalogError(f"--base: {directory}'s Dockerfile is not FROM another package")
        return directory
    return str(catalog.assemble(catalog.read(Path(directory), base), Path(work, "image")))


def _lint(directory: str, payload: str) -> LintReport:
    report = LintReport()
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


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{option} takes KEY=VALUE, got {value!r}")
        out[key] = rest
    return out


BASE_HELP = (
    "Where the image a layered package's Dockerfile is FROM is: the base package's directory or its "
    "image archive (default: the sibling directory named like that image)."
)


@package_app.command("lint")
def package_lint_command(
    directory: Annotated[Path, typer.Argument(help="Package directory or payload.")],
    base: Annotated[Path | None, typer.Option(help=BASE_HELP)] = None,
) -> None:
    """Check config.json, referenced scripts and the catalog layout; exit 1 on any error."""
    report = lint(str(directory), base)
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
        str,
        typer.Option(
            "--os",
            help="Test root flavour: debian, al2023 or cos (fake package managers), or debian-real "
            "(Debian 12 built by mmdebstrap: apt-get installs from the archive). "
            "`fleetwright package roots` lists them.",
        ),
    ] = "debian",
    package_key: Annotated[
        str | None,
        typer.Option(
            help="The NodeProfile's key for the package (field 2 of SKYHOOK_RESOURCE_ID); "
            "default: the package_name with '-' for '_'."
        ),
    ] = None,
    base: Annotated[Path | None, typer.Option(help=BASE_HELP)] = None,
    keep: Annotated[bool, typer.Option(help="Keep the test root and print its path.")] = False,
) -> None:
    """Run the agent for each --mode against a throwaway root filesystem (needs root)."""
    _check_test_options(mode, interrupt, package_key)
    files = _pairs(configmap or [], "--configmap")
    maps = {key: Path(path).read_text(encoding="utf-8") for key, path in files.items()}
    chosen = interrupts.InterruptRequest(INTERRUPT_TYPES[interrupt], tuple(service or ()))
    workdir = tempfile.mkdtemp(prefix="fleetwright-package-test-")
    try:
        payload = assembled(str(directory), base, workdir)
        host = _root(os.path.join(workdir, "root"), os_release)
        runs = runner.run_stages(
            host,
            payload,
            mode,
            configmaps=maps,
            env=_pairs(env or [], "--env"),
            interrupt=chosen,
            key=package_key,
        )
    except (HostRootError, config.ConfigError, ImageBuildError, catalog.CatalogError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    _report(runs)
    if keep:
        typer.echo(f"test root kept at {workdir}/root")
    if not all(run.ok for run in runs):
        raise typer.Exit(1)


def _root(path: str, flavour: str) -> hostroot.HostRoot:
    """A fresh test root: built from fakes, or unpacked from the real flavour's cached root
    (built first when the cache has none, or only one older than a day)."""
    if not hostroot.flavour_named(flavour).real:
        return hostroot.build(path, flavour=flavour)
    tar = roots.build(cache_dir(), flavour, log=lambda line: typer.echo(line, err=True))
    return hostroot.unpack(path, str(tar), flavour=flavour)


def _distribution(flavour: Flavour) -> str:
    found = re.search(r'^(?:PRETTY_)?NAME="([^"]*)"', flavour.os_release, re.MULTILINE)
    return found.group(1) if found else flavour.name


def _root_state(flavour: Flavour, *, build: bool) -> str:
    if not flavour.real:
        return "fakes only: its package manager records and installs nothing"
    if build:
        roots.build(cache_dir(), flavour.name, log=lambda line: typer.echo(line, err=True))
    found = roots.locate(cache_dir(), flavour)
    if not found.built:
        stale = "older than a day" if found.tar.is_file() else "not built"
        return f"{stale}: built on first use (about a minute, from the Debian archive)"
    return f"cached: {found.tar} ({found.tar.stat().st_size / 1e6:.0f} MB)"


@package_app.command("roots")
def package_roots_command(
    *,
    build: Annotated[bool, typer.Option(help="Build the real roots that are not cached yet.")] = False,
) -> None:
    """List the --os flavours of `package test`: which are real, and where real ones are cached."""
    rows = [("OS", "ROOT", "DISTRIBUTION", "STATE")]
    try:
        for name, flavour in FLAVOURS.items():
            kind = "real" if flavour.real else "fake"
            rows.append((name, kind, _distribution(flavour), _root_state(flavour, build=build)))
    except ImageBuildError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        typer.echo("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[3]]))


def _check_test_options(modes: list[str], interrupt: str, package_key: str | None) -> None:
    """Refuse what the run would fail on, before a test root is built."""
    from fleetwright.api.common import DNS_LABEL_PATTERN

    if interrupt not in INTERRUPT_TYPES:
        raise typer.BadParameter(f"--interrupt must be one of {', '.join(INTERRUPT_TYPES)}")
    if package_key is not None and not re.fullmatch(DNS_LABEL_PATTERN, package_key):
        raise typer.BadParameter(
            f"must be a DNS label like a NodeProfile package name, got {package_key!r}",
            param_hint="--package-key",
        )
    for stage in modes:
        try:
            runner.invocations(stage)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--mode") from None


def _report(runs: list[runner.StageInvocation]) -> None:
    for run in runs:
        note = ""
        if run.mode == runner.REBOOT_STARTED and run.ok:
            note = " (expected: the node reboots here)"
        typer.echo(f"=== {run.mode}: exit {run.result.returncode}{note}")
        typer.echo(run.result.output.rstrip())
