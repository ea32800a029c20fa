"""The CRD field-coverage recorder (tests/support/fieldcoverage.py) counts only what a manifest
chose: defaults and empty values cover nothing, every enum value is a requirement of its own."""

from __future__ import annotations

import pytest

from fleetwright.localcluster import examples
from tests.support.fieldcoverage import Recorder, observed, requirements, spec_schema

pytestmark = pytest.mark.unit


def test_requirements_are_the_leaves_and_enum_values_of_the_generated_schema() -> None:
    wanted = requirements("DeploymentPolicy")
    assert "DeploymentPolicy.spec.failure.action" in wanted
    assert {
        "DeploymentPolicy.spec.failure.action=halt",
        "DeploymentPolicy.spec.failure.action=rollback",
    } <= wanted
    assert "DeploymentPolicy.spec.compartments[].steps[].batches.strategy=linear" in wanted
    assert "DeploymentPolicy.spec.failure" not in wanted  # an object is covered through its leaves
    assert "NodeProfile.spec.sequencing=all" in requirements("NodeProfile")


def test_defaults_and_empty_values_cover_nothing() -> None:
    schema = spec_schema("NodeProfile")
    spec = {
        "drain": {"force": False, "timeoutSeconds": 3600},
        "additionalTolerations": [],
        "sequencing": "node",
    }
    assert observed("NodeProfile", spec, schema) == {"NodeProfile.spec.sequencing=node"}


def test_chosen_values_cover_their_path_and_enum_value() -> None:
    schema = spec_schema("NodeProfile")
    spec = {"drain": {"force": True, "onTimeout": "wait"}, "packages": [{"interrupt": {"type": "reboot"}}]}
    assert observed("NodeProfile", spec, schema) == {
        "NodeProfile.spec.drain.force",
        "NodeProfile.spec.drain.onTimeout",
        "NodeProfile.spec.drain.onTimeout=wait",
        "NodeProfile.spec.packages[].interrupt.type",
        "NodeProfile.spec.packages[].interrupt.type=reboot",
    }


def test_the_recorder_records_only_while_active() -> None:
    recorder = Recorder()
    recorder.observe(examples.profile(), examples.policy())
    assert recorder.seen == set()
    recorder.active = True
    recorder.observe(examples.profile(), examples.policy())
    assert "NodeProfile.spec.packages[].stageTimeoutSeconds" in recorder.seen
    assert "DeploymentPolicy.spec.failure.action=halt" in recorder.seen
    assert "DeploymentPolicy.spec.failure.action=rollback" not in recorder.seen
