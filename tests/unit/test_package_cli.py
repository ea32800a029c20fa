"""``fleetwright package lint`` and ``fleetwright package test`` through the real CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.cli.app import app
from fleetwright.cli.main import COMMAND_MODULES
from tests.support.payloads import step, write_package

pytestmark = pytest.mark.unit

CATALOG = Path(__file__).resolve().parents[2] / "packages"
PACKAGES = sorted(p.name for p in CATALOG.iterdir() if (p / "skyhook-package").is_dir())


def test_catalog_is_complete() -> None:
    expected = {
        "shellscript",
        "tuning",
        "kdump",
        "bind-mount",
        "kmod-mitigation",
        "gke-cos-tuning",
        "eks-gpu-setup",
    }
    assert set(PACKAGES) == expected
    assert any(m.__name__ == "fleetwright.cli.package" for m in COMMAND_MODULES)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_catalog_package_lints_and_has_a_chroot_test(name: str) -> None:
    result = CliRunner().invoke(app, ["package", "lint", str(CATALOG / name)])
    assert result.exit_code == 0, result.output
    assert "FROM busybox" in (CATALOG / name / "Dockerfile").read_text()
    assert (Path(__file__).parent / f"test_package_{name.replace('-', '_')}.py").is_file()


def test_lint_reports_every_problem(tmp_path: Path) -> None:
    pkg = tmp_path / "broken"
    write_package(
        str(pkg / "skyhook-package"),
        {
            "apply": [step("apply.sh"), step("gone.sh")],
            "config": [step("config.sh")],
            "config-check": [step("x.sh")],
        },
        {
            "apply.sh": "echo no shebang\n",
            "config.sh": "#!/bin/sh\n",
            "x.sh": "#!/bin/sh\n",
            "extra.sh": "#!/bin/sh\n",
        },
    )
    for script in ("apply.sh", "config.sh"):
        os.chmod(pkg / "skyhook-package" / "skyhook_dir" / script, 0o755)
    result = CliRunner().invoke(app, ["package", "lint", str(pkg)])
    assert result.exit_code == 1
    for expected in (
        "modes.apply-check: must have at least one step because apply has steps",
        "modes.apply[1].path: gone.sh does not exist under skyhook_dir/",
        "Dockerfile: missing",
        "README.md: missing",
    ):
        assert expected in result.output
    (pkg / "skyhook-package" / "skyhook_dir" / "gone.sh").write_text("#!/bin/sh\n")
    write_package(
        str(pkg / "skyhook-package"),
        {"apply": [step("apply.sh")], "apply-check": [step("x.sh")]},
        {},
    )
    result = CliRunner().invoke(app, ["package", "lint", str(pkg)])
    assert "modes.apply[0].path: skyhook_dir/apply.sh has no #! line" in result.output
    assert "modes.apply-check[0].path: skyhook_dir/x.sh is not executable" in result.output
    assert "skyhook_dir/extra.sh: .sh file is not executable" in result.output


def test_package_test_runs_the_agent_against_a_throwaway_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("package test runs chroots and must run as root")
    apply, check = tmp_path / "apply.sh", tmp_path / "check.sh"
    apply.write_text("echo hello > /etc/hello\n")
    check.write_text("grep -q hello /etc/hello\n")
    args = ["package", "test", str(CATALOG / "shellscript"), "--mode", "apply", "--keep"]
    args += ["--configmap", f"apply.sh={apply}", "--configmap", f"apply_check.sh={check}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "=== apply: exit 0" in result.output
    assert "=== apply-check: exit 0" in result.output
    kept = result.output.strip().splitlines()[-1].removeprefix("test root kept at ")
    assert Path(kept, "etc/hello").read_text() == "hello\n"
    failing = CliRunner().invoke(app, ["package", "test", str(CATALOG / "shellscript"), "--mode", "config"])
    assert failing.exit_code == 1
    assert "configMap key 'config.sh' is missing" in failing.output
