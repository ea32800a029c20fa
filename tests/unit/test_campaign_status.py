"""A Campaign's status as the controller derives it (``controller.campaigns``): each cluster's
rollout as its campaign last heard of it, an unreachable cluster named and never counted failed,
conditions a GitOps tool can wait on; the policies a campaign names, resolved; and the kubeconfig
Secrets the worker serves members for (``worker.members``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwright.api.campaign import Campaign
from fleetwright.api.conditions import find_condition
from fleetwright.controller.campaigns import derive, policies_for
from fleetwright.local import examples
from fleetwright.planner.campaign import ClusterReport
from fleetwright.worker.members import named_secrets
from fleetwright.workflows.payloads import CampaignProgress

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def campaign(**spec: Any) -> Campaign:
    return Campaign.model_validate(
        {
            "metadata": {"name": "driver", "generation": 3},
            "spec": {
                "profile": examples.profile().spec.model_dump(mode="json", by_alias=True, exclude_none=True),
                "clusters": [{"name": c, "kubeconfigSecret": f"{c}-kc"} for c in ("a", "b")],
                "stages": [{"name": "one", "clusters": ["a"]}, {"name": "two", "clusters": ["b"]}],
                **spec,
            },
        }
    )


def progress(phase: str, **clusters: ClusterReport) -> CampaignProgress:
    return CampaignProgress(
        campaign="driver",
        phase=phase,
        message=f"{phase} message",
        stage="one",
        clusters={"a": ClusterReport(phase="Pending"), "b": ClusterReport(phase="Pending"), **clusters},
        rollouts={name: f"nodeprofile/driver-{name}" for name in clusters},
    )


def test_each_cluster_shows_its_rollout_and_the_campaign_is_ready_once_complete() -> None:
    running = progress("Progressing", a=ClusterReport(phase="Progressing", targeted=4, updated=1))
    status = derive(campaign(), running, {}, NOW)
    assert status.phase == "Progressing"
    assert status.stage == "one"
    assert status.observed_generation == 3
    assert [(c.name, c.phase, c.nodes_complete, c.nodes_targeted) for c in status.clusters] == [
        ("a", "Progressing", 1, 4),
        ("b", "Pending", 0, 0),
    ]
    ready = find_condition(status.conditions, "Ready")
    assert ready is not None
    assert ready.status == "False"
    done = ClusterReport(phase="Complete", targeted=4, updated=4)
    complete = derive(campaign(), progress("Complete", a=done, b=done), {}, NOW)
    ready = find_condition(complete.conditions, "Ready")
    assert ready is not None
    assert ready.status == "True"


def test_an_unreachable_cluster_is_named_and_not_counted_failed() -> None:
    running = progress("Progressing", a=ClusterReport(phase="Progressing", targeted=4, updated=1))
    why = "list nodes: API server unreachable: connection refused (attempt 3)"
    status = derive(campaign(), running, {"a": why}, NOW)
    (a, _) = status.clusters
    assert a.phase == "Unreachable"
    assert a.message == why
    assert a.nodes_failed == 0
    progressing = find_condition(status.conditions, "Progressing")
    assert progressing is not None
    assert progressing.reason == "ClusterUnreachable"
    assert "a: list nodes: API server unreachable" in progressing.message
    degraded = find_condition(status.conditions, "Degraded")
    assert degraded is not None
    assert degraded.status == "False"


def test_a_fired_failure_rule_is_degraded_with_its_reason() -> None:
    halted = progress("Halted", a=ClusterReport(phase="Halted", failed=1))
    degraded = find_condition(derive(campaign(), halted, {}, NOW).conditions, "Degraded")
    assert degraded is not None
    assert (degraded.status, degraded.reason, degraded.message) == (
        "True",
        "FailureRuleFired",
        "Halted message",
    )


def policy_object(name: str) -> dict[str, Any]:
    return examples.policy(name=name).model_dump(mode="json", by_alias=True, exclude_none=True)


def test_the_policies_a_campaign_names_are_resolved_or_the_missing_one_named() -> None:
    named = campaign(
        policy={"name": "careful"},
        stages=[
            {"name": "one", "clusters": ["a"], "policy": {"name": "fast"}},
            {"name": "two", "clusters": ["b"]},
        ],
    )
    resolved = policies_for(named, [policy_object("careful"), policy_object("fast"), policy_object("other")])
    assert sorted(resolved) == ["", "careful", "fast"]
    with pytest.raises(KeyError, match="DeploymentPolicy fast not found"):
        policies_for(named, [policy_object("careful")])


def test_the_worker_serves_each_kubeconfig_secret_the_campaigns_name_once() -> None:
    objects = [
        campaign().model_dump(mode="json", by_alias=True),
        {"metadata": {"name": "broken"}, "spec": {"clusters": "nope"}},
        {
            "metadata": {"name": "more"},
            "spec": {"clusters": [{"kubeconfigSecret": "b-kc"}, {"kubeconfigSecret": "c-kc"}]},
        },
    ]
    assert named_secrets(objects) == ["a-kc", "b-kc", "c-kc"]
