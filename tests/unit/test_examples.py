"""The example manifests in ``examples/`` (what ``cluster up`` tells a new user to apply and the
demo rolls out) pass the admission webhook's checks offline, and refer only to each other.
``tests/integration/test_cluster_up.py`` applies them to a real stack and rolls them out."""

from __future__ import annotations

import pytest

from fleetwright.cli.validate import load_documents, validate_documents
from fleetwright.local.stack import example_profiles, examples_dir

pytestmark = pytest.mark.unit

FLEETWRIGHT_KINDS = {"NodeProfile", "DeploymentPolicy"}


def test_every_example_is_valid_with_no_warning() -> None:
    files = sorted(examples_dir().glob("*.yaml"))
    assert files, f"no examples in {examples_dir()}"
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
