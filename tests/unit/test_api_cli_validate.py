"""``fleetwright validate``: offline, multi-document, every error with its path, exit status 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwright.cli.app import app
from fleetwright.cli.commands import load_all
from tests.support.corpus import corpus_files, expected_path

pytestmark = pytest.mark.unit

load_all()  # every command registered on the app, as the entry point does for the one it runs

runner = CliRunner()

TWO_BAD = """
apiVersion: fleetwright.io/v1alpha1
kind: NodeProfile
metadata: {name: a}
spec:
  nodeSelector: {}
  packages:
  - {name: x, version: "1.2", image: ghcr.io/e/x, dependsOn: [{name: y, version: 1.0.0}]}
---
apiVersion: fleetwright.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: b}
spec: {maxUnavailable: 0}
"""


def test_valid_files_pass() -> None:
    files = [str(p) for p in corpus_files("valid")]
    result = runner.invoke(app, ["validate", *files])
    assert result.exit_code == 0, result.output
    assert "0 error(s)" in result.output


def test_every_error_is_printed_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TWO_BAD)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 1
    for expected in (
        f"{path}#0 NodeProfile/a: error spec.nodeSelector:",
        "error spec.packages[0].version:",
        "error spec.packages[0].dependsOn[0].name:",
        f"{path}#1 DeploymentPolicy/b: error spec.maxUnavailable:",
        "2 object(s) checked, 4 error(s)",
    ):
        assert expected in result.output


def test_stdin_lists_and_offline_policy_references() -> None:
    manifest = """
kind: List
items:
- apiVersion: fleetwright.io/v1alpha1
  kind: NodeProfile
  metadata: {name: a}
  spec:
    allNodes: true
    deploymentPolicyRef: {name: elsewhere}
    packages: [{name: x, version: 1.0.0, image: ghcr.io/e/x}]
"""
    result = runner.invoke(app, ["validate", "-"], input=manifest)
    assert result.exit_code == 0, result.output
    assert "warning spec.deploymentPolicyRef.name" in result.output


def test_unreadable_and_broken_yaml_are_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    result = runner.invoke(app, ["validate", str(broken), str(tmp_path / "missing.yaml")])
    assert result.exit_code == 1
    assert "not valid YAML" in result.output
    assert "cannot read" in result.output


def test_the_invalid_corpus_fails_offline_too() -> None:
    for path in corpus_files("invalid"):
        result = runner.invoke(app, ["validate", str(path)])
        if path.stem.endswith("policy-ref-missing"):
            # The one rule that needs the cluster: offline, a policy outside the files only warns.
            assert result.exit_code == 0
            assert f"warning {expected_path(path)}" in result.output
        else:
            assert result.exit_code == 1, path.name


def test_a_profile_image_outside_its_policys_allowed_registries_is_an_error() -> None:
    manifest = """
apiVersion: fleetwright.io/v1alpha1
kind: DeploymentPolicy
metadata: {name: strict}
spec: {allowedRegistries: [ghcr.io/acme]}
---
apiVersion: fleetwright.io/v1alpha1
kind: NodeProfile
metadata: {name: a}
spec:
  allNodes: true
  deploymentPolicyRef: {name: strict}
  packages:
  - {name: x, version: 1.0.0, image: ghcr.io/acme/x}
  - {name: y, version: 1.0.0, image: ghcr.io/acmeevil/y}
"""
    result = runner.invoke(app, ["validate", "-"], input=manifest)
    assert result.exit_code == 1, result.output
    assert (
        "error spec.packages[1].image: 'ghcr.io/acmeevil/y' is not from a registry DeploymentPolicy "
        "'strict' allows (its spec.allowedRegistries: ghcr.io/acme)"
    ) in " ".join(result.output.split())
    assert "spec.packages[0]" not in result.output
