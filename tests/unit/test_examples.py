"""The example manifests in ``examples/`` (what ``cluster up`` tells a new user to apply and the
demo rolls out) pass the admission webhook's checks offline, and refer only to each other; so do
the health-gated ones in ``examples/health-gate/`` (what ``demo --bad-gpu`` rolls out), whose node
gate runs the shipped dcgm-exporter checks over the series and node label the local GPU exporter
serves. ``tests/integration/test_cluster_up.py`` applies them to a real stack and rolls them out;
``tests/integration/test_demo.py`` the health-gated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.api.campaign import KIND, Campaign
from fleetwright.api.gpuchecks import dcgm_checks
from fleetwright.cli.demo import GATED_EXAMPLES
from fleetwright.cli.democampaign import CAMPAIGN_CLUSTERS, CAMPAIGN_EXAMPLES, Approvals
from fleetwright.cli.validate import load_documents, validate_documents
from fleetwright.local.gpuexporter import HEALTH_COUNTERS, XID_ERRORS, gpu_labels
from fleetwright.local.members import cluster_names, member_secret
from fleetwright.local.stack import example_documents, example_profiles, examples_dir

pytestmark = pytest.mark.unit

FLEETWRIGHT_KINDS = {"NodeProfile", "DeploymentPolicy"}


@pytest.mark.parametrize(
    "directory", [examples_dir(), examples_dir() / GATED_EXAMPLES], ids=["examples", "gated"]
)
def test_every_example_is_valid_with_no_warning(directory: Path) -> None:
    files = sorted(directory.glob("*.yaml"))
    assert files, f"no examples in {directory}"
    docs = []
    for path in files:
        found, errors = load_documents(path.name, path.read_text())
        assert errors == []
        docs += found
    ours = [d for d in docs if d.obj.get("kind") in FLEETWRIGHT_KINDS]
    assert {d.obj["kind"] for d in ours} == FLEETWRIGHT_KINDS
    for doc, result in validate_documents(ours):
        assert result.issues == [], f"{doc.label}: {[str(i) for i in result.issues]}"


def test_the_examples_name_their_profiles() -> None:
    assert example_profiles() == ["gpu-tuning"]


def gated_policy_spec() -> dict[str, Any]:
    for path in sorted((examples_dir() / GATED_EXAMPLES).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "DeploymentPolicy":
                spec: dict[str, Any] = doc["spec"]
                return spec
    raise AssertionError(f"no DeploymentPolicy in {examples_dir() / GATED_EXAMPLES}")


def test_the_gated_example_runs_the_shipped_dcgm_checks_over_the_exporters_series() -> None:
    assert example_profiles(examples_dir() / GATED_EXAMPLES) == ["gpu-tuning-gated"]
    spec = gated_policy_spec()
    shipped = dcgm_checks(window="1m", count=5, interval_seconds=5)
    assert spec["healthChecks"] == [
        c.model_dump(mode="json", by_alias=True, exclude_defaults=True) for c in shipped
    ]
    assert spec["nodeGate"] == {"checks": [c.name for c in shipped]}
    assert spec["failure"]["action"] == "halt"
    # Each query reads one of the exporter's series, selecting the node by the label it serves.
    node_label = next(k for k, v in gpu_labels("n", 0, "m").items() if v == "n")
    queried = {metric for metric in HEALTH_COUNTERS for c in shipped if f"{metric}{{{node_label}=" in c.query}
    assert queried == set(HEALTH_COUNTERS)


def test_the_campaign_example_is_valid_and_names_the_clusters_cluster_up_registers() -> None:
    directory = examples_dir() / CAMPAIGN_EXAMPLES
    [campaign] = [Campaign.model_validate(doc) for doc in example_documents(directory, KIND)]
    names = cluster_names(CAMPAIGN_CLUSTERS)
    assert [(c.name, c.kubeconfig_secret) for c in campaign.spec.clusters] == [
        (name, member_secret(name)) for name in names
    ]
    policies = example_documents(directory, "DeploymentPolicy")
    assert campaign.spec.policy is not None
    assert [p["metadata"]["name"] for p in policies] == [campaign.spec.policy.name]
    found, errors = load_documents(
        "campaign",
        yaml.safe_dump_all([*policies, campaign.model_dump(by_alias=True, exclude_none=True, mode="json")]),
    )
    assert errors == []
    for doc, result in validate_documents(found):
        assert result.issues == [], f"{doc.label}: {[str(i) for i in result.issues]}"
    assert Approvals.of(directory).stages == {"canary": names[:1]}
    # The canary stage's fleet gate queries the series the local GPU exporter serves.
    [check] = campaign.spec.stage_checks(campaign.spec.stages[0])
    node_label = next(k for k, v in gpu_labels("n", 0, "m").items() if v == "n")
    assert f"{XID_ERRORS}{{{node_label}=~" in check.query
