"""The shipped dcgm-exporter checks: ``fleetwright health-checks dcgm`` prints a valid policy
fragment with the cluster's metric names, and each check judges GPU series as it should (a moved
series fails, a steady one passes, no series is Inconclusive), and ``--diag-level`` adds a
``dcgmi diag`` validation from the catalog's gpu-health image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fleetwright.api.gpuchecks import GPU_HEALTH_IMAGE, DcgmNames, dcgm_checks
from fleetwright.api.validation import validate_deploymentpolicy
from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from fleetwright.planner.health.analysis import CheckPhase, classify

pytestmark = pytest.mark.unit
load_all()


def test_the_printed_checks_are_a_valid_gate_with_the_clusters_names() -> None:
    result = CliRunner().invoke(
        app, ["health-checks", "dcgm", "--xid-metric", "DCGM_EXP_XID", "--node-label", "node", "--count", "2"]
    )
    assert result.exit_code == 0, result.output
    spec = yaml.safe_load(result.stdout)
    policy = {"apiVersion": "fleetwright.io/v1alpha1", "kind": "DeploymentPolicy", "metadata": {"name": "g"}}
    assert validate_deploymentpolicy({**policy, "spec": spec}).ok
    assert spec["healthChecks"][0]["query"] == 'changes(DCGM_EXP_XID{node="{{node}}"}[10m])'
    assert spec["nodeGate"]["checks"] == [
        "gpu-xid-errors",
        "gpu-uncorrectable-remapped-rows",
        "gpu-row-remap-failure",
        "gpu-pcie-replays",
    ]


@pytest.mark.parametrize(
    ("values", "phase"),
    [([0.0, 0.0], CheckPhase.SUCCESSFUL), ([0.0, 1.0], CheckPhase.FAILED), ([], CheckPhase.INCONCLUSIVE)],
)
def test_each_check_fails_on_any_gpu_that_moved(values: list[float], phase: CheckPhase) -> None:
    for check in dcgm_checks(DcgmNames()):
        assert classify(check, values).phase is phase, check.name


def test_pcie_replays_tolerate_the_configured_number() -> None:
    pcie = dcgm_checks(pcie_replays_max=5)[-1]
    assert classify(pcie, [5.0]).phase is CheckPhase.SUCCESSFUL
    assert classify(pcie, [6.0]).phase is CheckPhase.FAILED


def test_a_diag_level_adds_a_privileged_dcgmi_diag_validation_from_the_gpu_health_image() -> None:
    result = CliRunner().invoke(app, ["health-checks", "dcgm", "--diag-level", "2"])
    assert result.exit_code == 0, result.output
    spec = yaml.safe_load(result.stdout)
    policy = {"apiVersion": "fleetwright.io/v1alpha1", "kind": "DeploymentPolicy", "metadata": {"name": "g"}}
    assert validate_deploymentpolicy({**policy, "spec": spec}).ok
    (diag,) = spec["nodeGate"]["validations"]
    assert diag == {
        "name": "dcgm-diag",
        "image": "ghcr.io/fleetwright/packages/gpu-health:1.0.0",
        "command": ["chroot", "/host", "dcgmi", "diag", "-r", "2"],
        "timeoutSeconds": 900,
        "privileged": True,
    }
    plain = yaml.safe_load(CliRunner().invoke(app, ["health-checks", "dcgm"]).stdout)
    assert "validations" not in plain["nodeGate"]
    refused = CliRunner().invoke(app, ["health-checks", "dcgm", "--diag-level", "5"])
    assert refused.exit_code != 0


def test_the_diag_image_is_the_catalogs_gpu_health_at_its_version() -> None:
    config = json.loads(
        (Path(__file__).parents[2] / "packages/gpu-health/skyhook-package/config.json").read_text()
    )
    assert f"ghcr.io/fleetwright/packages/gpu-health:{config['package_version']}" == GPU_HEALTH_IMAGE
