"""The chaos plans are reproducible from the seed, cover every fault kind and honour the flags;
the node a node fault hits is chosen from the snapshot as documented."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from fleetwright.api.keys import claim_key, cordon_key, state_key
from fleetwright.chaos.faults import choose_node
from fleetwright.chaos.iteration import Fault, Outcome, draw, rollback_plan
from fleetwright.chaos.runner import KILLED_WORKER_HEARTBEAT_SECONDS, engine_settings, manifests
from fleetwright.chaos.snapshot import NodeView

pytestmark = pytest.mark.unit


def test_the_same_seed_draws_the_same_plans_and_another_seed_differs() -> None:
    assert [draw(42, i) for i in range(5)] == [draw(42, i) for i in range(5)]
    assert [draw(42, i) for i in range(5)] != [draw(43, i) for i in range(5)]


def test_a_hundred_iterations_cover_every_fault_and_outcome() -> None:
    plans = [draw(7, i) for i in range(100)]
    faults = Counter(inj.fault for p in plans for inj in p.injections)
    assert set(faults) == set(Fault)
    assert {p.outcome for p in plans} == set(Outcome)
    for plan in plans:
        assert 1 <= plan.max_unavailable <= plan.nodes
        assert [i.at for i in plan.injections] == sorted(i.at for i in plan.injections)


def test_the_outage_flag_and_the_fault_filter() -> None:
    plans = [draw(1, i, outage_seconds=12, faults=(Fault.TEMPORAL_UNREACHABLE,)) for i in range(10)]
    assert {(i.fault, i.pause) for p in plans for i in p.injections} == {(Fault.TEMPORAL_UNREACHABLE, 12)}


def test_engine_settings_follow_the_outcome() -> None:
    plan = next(draw(3, i) for i in range(100) if draw(3, i).outcome is Outcome.FAIL)
    settings = engine_settings(plan)
    assert settings.stage_pod_labels == {"sim.fleetwright.io/outcome": "fail"}
    assert settings.stage_backoff_limit == plan.stage_failures - 1
    ok = next(draw(3, i) for i in range(100) if draw(3, i).outcome is Outcome.SUCCEED)
    assert engine_settings(ok).stage_pod_labels == {}
    assert f'"maxUnavailable": {ok.max_unavailable}' in manifests("p", ok)


def test_only_an_iteration_that_kills_the_worker_shortens_the_heartbeat_timeout() -> None:
    assert engine_settings(rollback_plan(3, 0)).heartbeat_timeout_seconds == KILLED_WORKER_HEARTBEAT_SECONDS
    killing = [
        p for p in (draw(3, i) for i in range(100)) if any(i.fault is Fault.KILL_WORKER for i in p.injections)
    ]
    sparing = [p for p in (draw(3, i) for i in range(100)) if p not in killing]
    assert killing
    assert sparing
    assert {engine_settings(p).heartbeat_timeout_seconds for p in killing} == {
        KILLED_WORKER_HEARTBEAT_SECONDS
    }
    # The default, left out of the payload: the upgrade test's previous release never sees it.
    assert all("heartbeat_timeout_seconds" not in engine_settings(p).model_dump() for p in sparing)


def test_node_faults_prefer_the_documented_nodes() -> None:
    rng = random.Random(0)
    nodes = [
        NodeView("busy", unschedulable=True, annotations={cordon_key("p"): "true"}),
        NodeView("done", annotations={state_key("p"): "{}"}),
        NodeView("fresh"),
    ]
    assert choose_node(Fault.DELETE_NODE, nodes, "p", rng) == "busy"
    assert choose_node(Fault.FOREIGN_CORDON, nodes, "p", rng) in {"done", "fresh"}
    assert {choose_node(Fault.MALFORMED_ANNOTATION, nodes, "p", rng) for _ in range(20)} == {"busy", "fresh"}
    assert choose_node(Fault.FOREIGN_LABEL, [], "p", rng) == ""
    # A workflow to terminate runs only where the profile's start claim is; none claimed, no target.
    assert choose_node(Fault.TERMINATE_NODE_WORKFLOW, nodes, "p", rng) == ""
    claimed = [*nodes, NodeView("starting", annotations={claim_key("p"): "true", claim_key("q"): "true"})]
    assert choose_node(Fault.TERMINATE_NODE_WORKFLOW, claimed, "p", rng) == "starting"


def test_a_rollback_iteration_replaces_a_complete_spec_with_one_whose_config_fails() -> None:
    plan = rollback_plan(42, 0)
    assert plan == rollback_plan(42, 0)
    assert plan.rollback
    assert [(i.fault, i.after_phase) for i in plan.injections] == [(Fault.KILL_WORKER, "RollingBack")]
    first, failing = (json.loads(manifests("p", plan, failing=f))["items"] for f in (False, True))
    assert first[0]["spec"]["failure"]["action"] == failing[0]["spec"]["failure"]["action"] == "rollback"
    (installed,) = first[1]["spec"]["packages"]
    (upgraded,) = failing[1]["spec"]["packages"]
    assert (installed["version"], installed.get("env", [])) == ("1.0.0", [])
    assert (upgraded["version"], upgraded["env"]) == (
        "1.1.0",
        [{"name": "SIM_FAIL_STAGE", "value": "config"}],
    )
    assert installed["interrupt"]["type"] == upgraded["interrupt"]["type"] == "reboot"
