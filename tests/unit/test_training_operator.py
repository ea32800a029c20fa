"""The training operator's pure parts (``local.trainingoperator``): which CRDs it installs, the
flags it runs with, and the stack's ``workloads`` option that adds it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleetwright.binaries import MissingBinaryError
from fleetwright.local.controlplane import ClusterOptions
from fleetwright.local.stack import LocalStack, StackOptions
from fleetwright.local.trainingoperator import NAME, TrainingOperator, crd_name

pytestmark = pytest.mark.unit

KINDS = ("mpijobs", "pytorchjobs", "tfjobs")


def never(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"kubectl {args} called before start")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache as tools/build-training-operator.sh leaves it: the binary and the module's CRDs."""
    monkeypatch.setenv("FLEETWRIGHT_CACHE", str(tmp_path))
    (tmp_path / "bin").mkdir()
    binary = tmp_path / "bin" / NAME
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    crds = tmp_path / "crds" / NAME
    crds.mkdir(parents=True)
    for plural in KINDS:
        (crds / f"kubeflow.org_{plural}.yaml").write_text("{}\n")
    return tmp_path


def test_a_crd_is_named_from_its_file() -> None:
    assert crd_name(Path("kubeflow.org_pytorchjobs.yaml")) == "pytorchjobs.kubeflow.org"


def test_every_kind_runs_unless_some_are_named(cache: Path) -> None:
    every = TrainingOperator(cache / "kubeconfig", never, workdir=cache / "op")
    assert [crd_name(p) for p in every.crds()] == [f"{k}.kubeflow.org" for k in KINDS]
    assert not [a for a in every.process.argv if a.startswith("--enable-scheme")]
    pytorch = TrainingOperator(cache / "kubeconfig", never, workdir=cache / "op", jobs=("pytorchjobs",))
    assert [crd_name(p) for p in pytorch.crds()] == ["pytorchjobs.kubeflow.org"]
    assert "--enable-scheme=pytorchjob" in pytorch.process.argv


def test_it_listens_on_loopback_and_reaches_the_cluster_by_its_kubeconfig(cache: Path) -> None:
    operator = TrainingOperator(cache / "kubeconfig", never, workdir=cache / "op")
    assert operator.process.env is not None
    assert operator.process.env["KUBECONFIG"] == str(cache / "kubeconfig")
    assert f"--health-probe-bind-address=127.0.0.1:{operator.probe_port}" in operator.process.argv
    assert f"--metrics-bind-address=127.0.0.1:{operator.metrics_port}" in operator.process.argv


def test_an_unknown_job_kind_is_refused_naming_the_field(cache: Path) -> None:
    operator = TrainingOperator(cache / "kubeconfig", never, workdir=cache / "op", jobs=("jaxjobs",))
    with pytest.raises(ValueError, match=r"jobs: no CRD for \['jaxjobs'\]"):
        operator.crds()


def test_a_missing_build_names_the_setup_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETWRIGHT_CACHE", str(tmp_path))
    with pytest.raises(MissingBinaryError, match=r"training-operator not found .*tools/setup\.sh"):
        TrainingOperator(tmp_path / "kubeconfig", never)


@pytest.mark.parametrize("workloads", [True, False])
def test_the_stack_runs_the_operator_only_with_workloads(cache: Path, workloads: bool) -> None:
    options = StackOptions(
        cluster=ClusterOptions(),
        workdir=cache / "stack",
        ui=False,
        webhook=False,
        gpu_metrics=False,
        registry=False,
        workloads=workloads,
    )
    stack = LocalStack(options)  # nothing starts before it is entered
    assert (NAME in stack.logs()) is workloads
