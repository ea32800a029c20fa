"""The pydantic models: conventions (camelCase, strict, unknown fields), safe defaults, spellings."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from fleetwright.api.common import ApiModel
from fleetwright.api.conditions import Condition, find_condition, set_condition
from fleetwright.api.deploymentpolicy import BUILTIN_POLICY, DeploymentPolicy, DeploymentPolicySpec
from fleetwright.api.nodeprofile import NodeProfile, NodeProfileSpec
from fleetwright.api.windows import check_cron, check_time_zone
from fleetwright.planner.convert import budget
from tests.support.manifests import profile_manifest

pytestmark = pytest.mark.unit


def test_profile_round_trips_in_camel_case() -> None:
    np = NodeProfile.model_validate(profile_manifest(podNonInterruptLabels={"matchLabels": {"a": "b"}}))
    out = np.to_k8s()
    assert out["spec"]["podNonInterruptLabels"] == {"matchLabels": {"a": "b"}, "matchExpressions": []}
    assert out["spec"]["packages"][0]["stageTimeoutSeconds"] == 3600
    assert NodeProfile.model_validate(out) == np


def test_python_names_are_accepted_too() -> None:
    spec = NodeProfileSpec(
        node_selector={"match_labels": {"a": "b"}},  # type: ignore[arg-type]
        packages=[{"name": "x", "version": "1.0.0", "image": "ghcr.io/a/x"}],  # type: ignore[list-item]
    )
    assert spec.node_selector is not None
    assert spec.node_selector.match_labels == {"a": "b"}


def test_metadata_from_the_apiserver_parses_unchanged() -> None:
    obj = profile_manifest()
    obj["metadata"] = {
        "name": "p",
        "generation": 3,
        "uid": "u",
        "managedFields": [{"manager": "kubectl"}],
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    np = NodeProfile.model_validate(obj)
    assert np.metadata.generation == 3
    assert np.metadata.creation_timestamp == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("patch", "loc"),
    [
        ({"bogus": 1}, ("spec", "bogus")),
        ({"priority": "5"}, ("spec", "priority")),
        ({"runtimeRequired": "yes"}, ("spec", "runtimeRequired")),
        ({"drain": {"onTimeout": "ignore"}}, ("spec", "drain", "onTimeout")),
    ],
)
def test_unknown_fields_and_loose_types_are_errors(patch: dict[str, Any], loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        NodeProfile.model_validate(profile_manifest(**patch))
    assert loc in [tuple(e["loc"]) for e in info.value.errors()]


def test_empty_selector_does_not_mean_all_nodes() -> None:
    with pytest.raises(ValidationError, match="nodeselector-required"):
        NodeProfile.model_validate(profile_manifest(nodeSelector={}))
    everything = NodeProfile.model_validate(
        {**profile_manifest(), "spec": {"allNodes": True, "packages": profile_manifest()["spec"]["packages"]}}
    )
    assert everything.spec.all_nodes


def test_agent_spelling_of_restart_all_services_is_normalized() -> None:
    obj = profile_manifest()
    obj["spec"]["packages"][0]["interrupt"] = {"type": "restart_all_services"}
    np = NodeProfile.model_validate(obj)
    assert np.spec.packages[0].interrupt is not None
    assert np.spec.packages[0].interrupt.type == "restartAllServices"


def test_image_reference_prefers_the_digest() -> None:
    obj = profile_manifest()
    pkg = NodeProfile.model_validate(obj).spec.packages[0]
    assert pkg.image_reference() == "ghcr.io/example/tuning:1.0.0"
    obj["spec"]["packages"][0]["digest"] = "sha256:" + "0" * 64
    pinned = NodeProfile.model_validate(obj).spec.packages[0]
    assert pinned.image_reference().endswith("@sha256:" + "0" * 64)


def test_policy_defaults_are_conservative() -> None:
    spec = DeploymentPolicySpec()
    assert spec.max_unavailable == 1
    assert spec.failure.max_failed_nodes == 0
    assert spec.failure.action == "halt"
    steps = spec.effective_steps()
    assert [s.kind for s in steps] == ["batches"]
    assert steps[0].batches is not None
    assert steps[0].batches.strategy == "fixed"
    assert steps[0].batches.initial == 1
    assert BUILTIN_POLICY.metadata.name == "builtin-default"


def test_nodewright_strategies_are_expressible() -> None:
    dp = DeploymentPolicy.model_validate(
        {
            "metadata": {"name": "nw"},
            "spec": {
                "maxUnavailable": "25%",
                "steps": [
                    {
                        "batches": {
                            "strategy": "exponential",
                            "initial": 2,
                            "growthFactor": 3,
                            "batchThreshold": 80,
                            "safetyLimit": 40,
                        }
                    }
                ],
                "failure": {"failureThreshold": 2},
            },
        }
    )
    batches = dp.spec.steps[0].batches
    assert batches is not None
    assert (batches.initial, batches.effective_growth_factor(), batches.batch_threshold) == (2, 3, 80)
    assert batches.effective_delta() == 1
    assert dp.spec.failure.failure_threshold == 2


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [(1, 10, 1), (5, 3, 3), ("10%", 100, 10), ("10%", 5, 1), ("100%", 7, 7), ("50%", 0, 0)],
)
def test_int_or_percent_resolves_to_a_node_count(value: int | str, total: int, expected: int) -> None:
    assert budget(value).resolve(total) == expected


@pytest.mark.parametrize("bad", [True, -1, "x", "101%", "5.5%", 1.5, None])
def test_int_or_percent_rejects_garbage(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        DeploymentPolicySpec.model_validate({"maxUnavailable": bad})
    assert info.value.errors()[0]["loc"] == ("maxUnavailable",)


@pytest.mark.parametrize("expr", ["0 2 * * *", "*/15 0-6 1,15 jan-mar mon-fri", "0 0 * * 7", "5 4 * * sun"])
def test_cron_accepts(expr: str) -> None:
    assert check_cron(expr) == expr


@pytest.mark.parametrize(
    "expr", ["0 24 * * *", "* * * *", "0 0 0 * *", "*/0 * * * *", "0 5-2 * * *", "x * * * *"]
)
def test_cron_rejects(expr: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        check_cron(expr)


def test_time_zones_are_iana_names() -> None:
    assert check_time_zone("Europe/Berlin") == "Europe/Berlin"
    for bad in ("Mars/Base", "../etc/passwd", "/etc/localtime", ""):
        with pytest.raises(ValueError, match=r"."):
            check_time_zone(bad)


def test_every_field_has_a_description() -> None:
    missing = []
    seen: set[type[ApiModel]] = set()

    def walk(model: type[ApiModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            if not info.description:
                missing.append(f"{model.__name__}.{name}")
        for sub in ApiModel.__subclasses__():
            walk(sub)

    walk(NodeProfile)
    assert not missing


def test_set_condition_keeps_transition_time_when_status_is_unchanged() -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    t1 = t0 + dt.timedelta(hours=1)
    first = Condition(type="Ready", status="False", reason="Progressing", last_transition_time=t0)
    same = Condition(
        type="Ready", status="False", reason="StillGoing", message="3/10", last_transition_time=t1
    )
    conds = set_condition([first], same)
    ready = find_condition(conds, "Ready")
    assert ready is not None
    assert ready.last_transition_time == t0
    assert ready.reason == "StillGoing"
    flipped = set_condition(
        conds, Condition(type="Ready", status="True", reason="Complete", last_transition_time=t1)
    )
    ready = find_condition(flipped, "Ready")
    assert ready is not None
    assert ready.last_transition_time == t1
    assert len(flipped) == 1
