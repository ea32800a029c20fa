"""Catalog package ``gpu-health``: the node's GPUs checked with the host's nvidia-smi, dmesg and
dcgmi, here the throwaway root's fakes (eight healthy H100s unless a test gives them faults through
the environment, as ``fleetwright package test --env`` does). Each fault fails the check with a
line naming the GPU and what found it; a bad configuration is refused naming its key (needs
root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.cli.app import app
from fleetwright.cli.package import lint
from fleetwright.packagetest.hostroot import HostRoot
from fleetwright.packagetest.runner import StageInvocation, run_stages
from tests.support.payloads import chroot_root, codes

pytestmark = pytest.mark.unit

PACKAGE = str(Path(__file__).resolve().parents[2] / "packages" / "gpu-health")


def output(runs: list[StageInvocation]) -> str:
    return "\n".join(run.result.output for run in runs)


def problems(runs: list[StageInvocation]) -> list[str]:
    """The summary's problem lines of the failed check, without the agent's prefixes."""
    lines = [line.split("[err] ", 1)[1] for line in output(runs).splitlines() if "[err]   " in line]
    return [line.strip() for line in lines]


def check(root: HostRoot, faults: str = "", level: str = "1", **configmaps: str) -> list[StageInvocation]:
    env = {"FAKE_GPU_FAULTS": faults} if faults else {}
    return run_stages(root, PACKAGE, ["apply"], env=env, configmaps={"dcgm_diag_level": level, **configmaps})


def test_lints_clean() -> None:
    report = lint(PACKAGE)
    assert report.errors == []
    assert report.warnings == []


def test_package_test_passes_on_healthy_gpus_and_fails_naming_a_bad_one(tmp_path: Path) -> None:
    runner = CliRunner()
    healthy = runner.invoke(app, ["package", "test", PACKAGE, "--mode", "apply", "--mode", "config"])
    assert healthy.exit_code == 0, healthy.output
    assert "8 GPU(s) healthy (NVIDIA H100 80GB HBM3)" in healthy.output
    assert "dcgmi diag -r 1" in healthy.output
    level = tmp_path / "level"
    level.write_text("2\n")
    args = ["--configmap", f"dcgm_diag_level={level}", "--env", "FAKE_GPU_FAULTS=6:dcgm=GPU Memory"]
    broken = runner.invoke(app, ["package", "test", PACKAGE, "--mode", "apply", *args])
    assert broken.exit_code == 1, broken.output
    assert "=== apply-check: exit 1" in broken.output
    assert "GPU 6 (00000000:78:00.0): dcgmi diag -r 2, test 'GPU Memory' failed" in broken.output


def test_healthy_gpus_pass_every_check_and_change_nothing(tmp_path: Path) -> None:
    root = chroot_root(tmp_path)
    runs = check(root, expected_gpus="8")
    assert codes(runs) == [0, 0], output(runs)
    calls = root.calls()
    assert any(c.startswith("nvidia-smi --query-remapped-rows=") for c in calls)
    assert "dmesg " in calls
    assert "dcgmi diag -r 1" in calls
    # Nothing but queries: no tool that changes the host ran.
    assert {c.split()[0] for c in calls} == {"nvidia-smi", "dmesg", "dcgmi"}


@pytest.mark.parametrize(
    ("faults", "problem"),
    [
        (
            "4:ecc.errors.uncorrected.volatile.total=3",
            "GPU 4 (00000000:58:00.0): 3 uncorrectable ECC error(s) since the driver loaded",
        ),
        ("1:pcie.link.width.current=8", "GPU 1 (00000000:28:00.0): PCIe link at x8 of x16"),
        (
            "7:remapped_rows.failure=1",
            "GPU 7 (00000000:88:00.0): row remapping failed (remapped_rows.failure: 1): no spare rows left",
        ),
        ("2:xid=79", "GPU 2 (00000000:38:00.0): XID 79 in the kernel log"),
        ("5:retired_pages.pending=Yes", "GPU 5 (00000000:68:00.0): page retirement pending"),
    ],
)
def test_each_nvidia_smi_and_kernel_fault_fails_naming_the_gpu(
    tmp_path: Path, faults: str, problem: str
) -> None:
    runs = check(chroot_root(tmp_path), faults, level="0")
    assert codes(runs) == [0, 1]
    (line,) = problems(runs)
    assert line.startswith(problem), line


def test_a_pending_row_remap_fails_nvidia_smi_and_dcgms_deployment_test(tmp_path: Path) -> None:
    runs = check(chroot_root(tmp_path), "3:remapped_rows.pending=1")
    assert codes(runs) == [0, 1]
    assert problems(runs) == [
        "GPU 3 (00000000:48:00.0): row remapping pending (remapped_rows.pending: 1, 0 uncorrectable row(s) "
        "remapped): reset the GPU",
        "GPU 3 (00000000:48:00.0): dcgmi diag -r 1, test 'Page Retirement/Row Remap' failed: GPU 3 has "
        "uncorrectable memory errors and row remappings are pending",
    ]
    assert "FAILED: 2 problem(s) on this node's 8 GPU(s)" in output(runs)


def test_a_memory_fault_is_found_from_the_level_that_runs_its_test(tmp_path: Path) -> None:
    faults = "0:dcgm=GPU Memory;5:dcgm=GPU Memory"
    assert codes(check(chroot_root(tmp_path / "one"), faults, level="1")) == [0, 0]
    runs = check(chroot_root(tmp_path / "two"), faults, level="2")
    assert codes(runs) == [0, 1]
    lines = problems(runs)
    assert [line.split(":", 1)[0] for line in lines] == ["GPU 0 (00000000", "GPU 5 (00000000"]
    # dcgmi's Warning, put back together from the rows it was wrapped over.
    assert lines[0].endswith(
        "test 'GPU Memory' failed: GPU 0 GPU Memory found errors (fake fault); run a field diagnostic "
        "and replace the GPU if it fails again."
    )


def test_an_ignored_xid_passes_and_each_xid_is_named_once(tmp_path: Path) -> None:
    assert codes(check(chroot_root(tmp_path / "a"), "2:xid=13;2:xid=43", level="0")) == [0, 0]
    runs = check(chroot_root(tmp_path / "b"), "2:xid=48;2:xid=48;4:xid=13", level="0", ignored_xids="")
    assert [line.split(": ", 1)[1][:6] for line in problems(runs)] == ["XID 48", "XID 13"]


def test_a_missing_gpu_fails_the_count(tmp_path: Path) -> None:
    root = chroot_root(tmp_path)
    runs = run_stages(root, PACKAGE, ["apply"], env={"FAKE_GPUS": "7"}, configmaps={"expected_gpus": "8\n"})
    assert codes(runs) == [0, 1]
    assert problems(runs) == [
        "GPU count: nvidia-smi sees 7 GPU(s), expected_gpus is 8 (a GPU fell off the bus?)"
    ]


def test_a_driver_nvidia_smi_cannot_reach_is_the_one_problem(tmp_path: Path) -> None:
    runs = run_stages(chroot_root(tmp_path), PACKAGE, ["apply"], env={"FAKE_GPU_DRIVER": "missing"})
    assert codes(runs) == [0, 1]
    assert problems(runs) == [
        "nvidia-smi cannot list the GPUs: NVIDIA-SMI has failed because it couldn't communicate with "
        "the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
    ]
    assert "on this node's 0 GPU(s) (no GPU)" in output(runs)


def test_a_host_without_nvidia_smi_fails_naming_it(tmp_path: Path) -> None:
    root = chroot_root(tmp_path)
    os.unlink(root.host("/usr/bin/nvidia-smi"))
    runs = check(root)
    assert codes(runs) == [0, 1]
    (line,) = problems(runs)
    assert line.startswith("nvidia-smi cannot list the GPUs: "), line
    assert "nvidia-smi: command not found" in line


def test_a_host_without_dcgm_fails_unless_the_level_is_0(tmp_path: Path) -> None:
    root = chroot_root(tmp_path)
    os.unlink(root.host("/usr/bin/dcgmi"))
    runs = check(root)
    assert codes(runs) == [0, 1]
    assert problems(runs) == [
        "dcgmi not found: install NVIDIA DCGM on the host, or set the configMap dcgm_diag_level to 0"
    ]
    assert codes(check(root, level="0")) == [0, 0]


def test_a_bad_configuration_is_refused_naming_every_key_before_any_check(tmp_path: Path) -> None:
    root = chroot_root(tmp_path)
    runs = check(root, level="high", expected_gpus="eight", ignored_xids="13,31")
    assert codes(runs) == [1]
    text = output(runs)
    for key in ("dcgm_diag_level: 'high'", "expected_gpus: 'eight'", "ignored_xids: '13,31'"):
        assert f"gpu-health: configMap {key}" in text
    assert root.calls() == []
