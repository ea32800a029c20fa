"""The shipped dcgm-exporter checks: ``fleetwright health-checks dcgm`` prints a valid policy
fragment with the cluster's metric names, and each check judges GPU series as it should (a moved
series fails, a steady one passes, no series is Inconclusive)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from fleetwright.api.gpuchecks import DcgmNames, dcgm_checks
from fleetwright.api.validation import validate_deploymentpolicy
from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from fleetwright.planner.analysis import Phase, classify

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
    [([0.0, 0.0], Phase.SUCCESSFUL), ([0.0, 1.0], Phase.FAILED), ([], Phase.INCONCLUSIVE)],
)
def test_each_check_fails_on_any_gpu_that_moved(values: list[float], phase: Phase) -> None:
    for check in dcgm_checks(DcgmNames()):
        assert classify(check, values).phase is phase, check.name


def test_pcie_replays_tolerate_the_configured_number() -> None:
    pcie = dcgm_checks(pcie_replays_max=5)[-1]
    assert classify(pcie, [5.0]).phase is Phase.SUCCESSFUL
    assert classify(pcie, [6.0]).phase is Phase.FAILED
