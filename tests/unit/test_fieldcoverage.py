"""The CRD field-coverage recorder (tests/support/fieldcoverage.py) counts only what a manifest
chose: defaults and empty values cover nothing, every enum value is a requirement of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetwright.local import examples
from tests.support import fieldcoverage
from tests.support.fieldcoverage import (
    SHARE_ENV,
    TESTS,
    Recorder,
    Shared,
    observed,
    requirements,
    share,
    shared,
    spec_schema,
)

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


def test_a_process_shares_its_record_and_the_judge_reads_the_union(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SHARE_ENV, str(tmp_path))
    recorder = Recorder(seen={"NodeProfile.spec.packages[].name"}, deselected={"tests/workflow/test_x.py::t"})
    monkeypatch.setattr(fieldcoverage, "RECORDER", recorder)
    share({TESTS / "workflow" / "test_replay.py"})
    recorder.seen = {"DeploymentPolicy.spec.maxUnavailable"}
    recorder.deselected = set()
    monkeypatch.setattr(os, "getpid", lambda: 1)  # another process
    share({TESTS / "workflow" / "test_node_gate.py"})
    assert [p.suffix for p in tmp_path.iterdir()] == [".json", ".json"]  # no half-written record
    assert shared() == Shared(
        seen=frozenset({"NodeProfile.spec.packages[].name", "DeploymentPolicy.spec.maxUnavailable"}),
        ran=frozenset({TESTS / "workflow" / "test_replay.py", TESTS / "workflow" / "test_node_gate.py"}),
        deselected=frozenset({"tests/workflow/test_x.py::t"}),
    )


def test_without_a_shared_directory_nothing_is_written_or_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SHARE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    share({TESTS / "workflow" / "test_replay.py"})
    assert list(tmp_path.iterdir()) == []
    assert shared() == Shared()
