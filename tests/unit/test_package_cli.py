"""``fleetwright package lint`` and ``fleetwright package test`` through the real CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.agent.interrupts import NODE_RESTART, InterruptRequest
from fleetwright.cli.app import app
from fleetwright.cli.commands import load, load_all
from fleetwright.packagetest.hostroot import build
from fleetwright.packagetest.runner import REBOOT_STARTED, run_stages
from tests.support.payloads import needs_root, step, write_package

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
        "gpu-node-tuning",
        "gpu-driver-setup",
        "gpu-health",
    }
    assert set(PACKAGES) == expected
    assert any(m.__name__ == "fleetwright.cli.package" for m in load_all())


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
    needs_root()
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


def _record_id_package(directory: Path, name: str) -> None:
    write_package(
        str(directory),
        {"apply": [step("apply.sh")], "apply-check": [step("apply_check.sh")]},
        {
            "apply.sh": '#!/bin/sh\necho "$SKYHOOK_RESOURCE_ID" > /etc/resource-id\n',
            "apply_check.sh": "#!/bin/sh\ntest -s /etc/resource-id\n",
        },
        name=name,
    )


def test_package_names_with_underscores_get_a_three_field_resource_id(tmp_path: Path) -> None:
    needs_root()
    _record_id_package(tmp_path / "pkg", "gpu_driver_setup")
    result = CliRunner().invoke(app, ["package", "test", str(tmp_path / "pkg"), "--mode", "apply", "--keep"])
    assert result.exit_code == 0, result.output
    kept = Path(result.output.strip().splitlines()[-1].removeprefix("test root kept at "))
    # Field 2 is the NodeProfile's package key, a DNS label: the name with '-' for '_'.
    assert (kept / "etc/resource-id").read_text() == "test-0000-1_gpu-driver-setup_1.0.0\n"


def test_package_key_can_be_given_and_must_be_a_dns_label(tmp_path: Path) -> None:
    needs_root()
    _record_id_package(tmp_path / "pkg", "gpu_driver_setup")
    args = ["package", "test", str(tmp_path / "pkg"), "--mode", "apply", "--keep"]
    result = CliRunner().invoke(app, [*args, "--package-key", "drivers"])
    assert result.exit_code == 0, result.output
    kept = Path(result.output.strip().splitlines()[-1].removeprefix("test root kept at "))
    assert (kept / "etc/resource-id").read_text() == "test-0000-1_drivers_1.0.0\n"
    bad = CliRunner().invoke(app, [*args, "--package-key", "gpu_drivers"])
    assert bad.exit_code == 2
    assert "--package-key" in bad.output


def test_a_reboot_interrupt_that_completes_exits_zero(tmp_path: Path) -> None:
    needs_root()
    write_package(
        str(tmp_path / "pkg"),
        {
            "config": [step("config.sh")],
            "config-check": [step("config_check.sh")],
            "post-interrupt-check": [step("post_interrupt_check.sh")],
        },
        {
            "config.sh": "#!/bin/sh\ncat /proc/sys/kernel/random/boot_id > /etc/boot-before\n",
            "config_check.sh": "#!/bin/sh\ntest -s /etc/boot-before\n",
            "post_interrupt_check.sh": '#!/bin/sh\n[ "$(cat /proc/sys/kernel/random/boot_id)" != '
            '"$(cat /etc/boot-before)" ]\n',
        },
    )
    args = ["package", "test", str(tmp_path / "pkg"), "--interrupt", "reboot"]
    args += ["--mode", "config", "--mode", "interrupt", "--mode", "post-interrupt"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "=== interrupt (before reboot): exit 1 (expected: the node reboots here)" in result.output
    assert "reboot confirmed: boot id changed" in result.output
    assert "=== post-interrupt-check: exit 0" in result.output


def test_a_reboot_interrupt_that_never_reboots_fails(tmp_path: Path) -> None:
    needs_root()
    write_package(
        str(tmp_path / "pkg"),
        {"config": [step("config.sh")], "config-check": [step("config.sh")]},
        {"config.sh": "#!/bin/sh\n# the fake reboot fails: the host refuses to go down\nexit 0\n"},
    )
    args = ["package", "test", str(tmp_path / "pkg"), "--interrupt", "reboot", "--mode", "interrupt"]
    args += ["--env", "PATH=/bin"]  # no /usr/sbin: the agent cannot find reboot at all
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "=== interrupt (before reboot): exit 1" in result.output
    assert "expected" not in result.output


def test_lint_warns_that_on_host_false_is_ignored(tmp_path: Path) -> None:
    write_package(
        str(tmp_path / "pkg"),
        {"apply": [step("apply.sh", on_host=False)], "apply-check": [step("apply_check.sh")]},
        {"apply.sh": "#!/bin/sh\n", "apply_check.sh": "#!/bin/sh\n"},
    )
    for script in ("apply.sh", "apply_check.sh"):
        os.chmod(tmp_path / "pkg" / "skyhook_dir" / script, 0o755)
    result = CliRunner().invoke(app, ["package", "lint", str(tmp_path / "pkg")])
    assert result.exit_code == 0, result.output
    assert "warning: modes.apply[0].on_host: false is ignored: every step runs in the host's chroot" in (
        result.output
    )


def test_a_refused_reboot_fails_the_interrupt_and_does_not_reboot(tmp_path: Path) -> None:
    needs_root()
    write_package(
        str(tmp_path / "pkg"),
        {"config": [step("config.sh")], "config-check": [step("config.sh")]},
        {"config.sh": "#!/bin/sh\n"},
    )
    host = build(str(tmp_path / "root"))
    host.fake_state("reboot-mode", "fail")  # reboot exits 1: "Failed to connect to bus"
    boot_id = host.boot_id()
    runs = run_stages(host, str(tmp_path / "pkg"), ["interrupt"], interrupt=InterruptRequest(NODE_RESTART))
    assert [(r.mode, r.ok) for r in runs] == [(REBOOT_STARTED, False)]
    assert "reboot failed" in runs[0].result.output
    assert host.boot_id() == boot_id


def test_os_names_the_roots_and_which_are_real() -> None:
    load(["package"])
    listed = CliRunner().invoke(app, ["package", "roots"])
    assert listed.exit_code == 0, listed.output
    kinds = {line.split()[0]: line.split()[1] for line in listed.output.splitlines()[1:]}
    assert kinds == {"debian": "fake", "al2023": "fake", "cos": "fake", "debian-real": "real"}
    unknown = CliRunner().invoke(
        app, ["package", "test", str(CATALOG / "shellscript"), "--os", "ubuntu", "-m", "apply"]
    )
    assert unknown.exit_code == 1
    assert "debian (fake), al2023 (fake), cos (fake), debian-real (real), got 'ubuntu'" in unknown.output
