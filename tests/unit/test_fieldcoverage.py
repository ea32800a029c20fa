"""The CRD field-coverage recorder (tests/support/fieldcoverage.py) counts only what a manifest
chose: defaults and empty values cover nothing, every enum value is a requirement of its own."""

from __future__ import annotations

import pytest

from fleetwright.local import examples
from tests.support.fieldcoverage import Recorder, observed, requirements, spec_schema

pytestmark = pytest.mark.unit


def test_requirements_are_the_leaves_and_enum_values_of_the_generated_schema() -> None:
    wanted = requirements("DeploymentPolicy")
    assert "DeploymentPolicy.spec.failure.action" in wanted
    assert {
        "DeploymentPolicy.spec.failure.action=halt",
        "DeploymentPolicy.spec.failure.action=rollback",
    } <= wanted
    assert "DeploymentPolicy.spec.steps[].batches.strategy=linear" in wanted
    assert "DeploymentPolicy.spec.failure" not in wanted  # an object is covered through its leaves
    assert "NodeProfile.spec.sequencing=all" in requirements("NodeProfile")
    interrupts = {
        r for r in requirements("NodeProfile") if r.startswith("NodeProfile.spec.packages[].interrupt.type=")
    }
    # The agent's spelling of restartAllServices is stored as restartAllServices: no value of its own.
    assert {i.rsplit("=", 1)[1] for i in interrupts} == {"reboot", "service", "restartAllServices", "noop"}


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


def test_the_recorder_observes_a_profile_and_a_policy_or_a_profile_alone() -> None:
    recorder = Recorder()
    recorder.observe(examples.profile(), None)  # a deletion signal may carry no policy
    assert "NodeProfile.spec.packages[].stageTimeoutSeconds" in recorder.seen
    assert not any(path.startswith("DeploymentPolicy") for path in recorder.seen)
    recorder.observe(examples.profile(), examples.policy())
    assert "DeploymentPolicy.spec.failure.action=halt" in recorder.seen
    assert "DeploymentPolicy.spec.failure.action=rollback" not in recorder.seen


def test_a_type_used_at_several_places_is_required_once_and_each_place_once() -> None:
    wanted = requirements("DeploymentPolicy")
    assert "DeploymentPolicy.spec.compartments[].steps" in wanted  # the place
    assert not any(p.startswith("DeploymentPolicy.spec.compartments[].steps[]") for p in wanted)
    compartment = {
        "name": "h100",
        "selector": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
        "steps": [{"batches": {"strategy": "linear", "initial": 1, "delta": 2}}],
    }
    seen = observed("DeploymentPolicy", {"compartments": [compartment]}, spec_schema("DeploymentPolicy"))
    # The steps' fields count where steps are first defined; the selector's where selectors are.
    assert {
        "DeploymentPolicy.spec.compartments[].steps",
        "DeploymentPolicy.spec.steps[].batches.strategy=linear",
        "DeploymentPolicy.spec.steps[].batches.delta",
        "DeploymentPolicy.spec.compartments[].selector",
        "NodeProfile.spec.nodeSelector.matchExpressions[].operator=Exists",
    } <= seen
