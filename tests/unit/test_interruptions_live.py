"""The live interruptions bench's pure parts: the fleet laid as a group, what it applies, and
NodeWright's order in observed slots (``bench/interruptions_live.py``)."""

from __future__ import annotations

import argparse

import pytest

from bench import interruptions as sim
from bench.interruptions_live import GROUP, GROUPS, Group, LiveRun, created, lay, parse_args, report, slots_of
from fleetwright.kube.workloads import node_workloads
from fleetwright.local.trainingfleet import TrainingFleet, training_fleet

pytestmark = pytest.mark.unit


def fleet_of(nodes: int = 32) -> TrainingFleet:
    return training_fleet(sim.shape_of(parse_args(["--nodes", str(nodes), "--max-job-nodes", "8"])))


def test_a_second_group_is_the_same_fleet_under_new_names() -> None:
    fleet = fleet_of()
    group = lay(fleet, "aware", 1)
    assert group.names[0] == "gpu-node-0032"
    assert group.names[-1] == "gpu-node-0063"
    assert [len(j.nodes) for j in group.jobs] == [len(j.nodes) for j in fleet.jobs]
    zones = [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in group.nodes]
    assert zones == [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in fleet.nodes]
    assert {n["metadata"]["labels"][GROUP] for n in group.nodes} == {"aware"}
    assert all(p["metadata"]["namespace"] == "train-aware" for p in group.pods)


def test_the_workloads_of_a_group_are_its_jobs() -> None:
    group = lay(fleet_of(), "zone", 0)
    found = sim.jobs_of(node_workloads(group.pods))
    assert [(j.name, j.nodes) for j in found] == sorted(
        (f"{j.kind}/train-zone/{j.name}", tuple(sorted(j.nodes))) for j in group.jobs
    )


def test_what_is_applied_leaves_the_groups_creation_times_alone() -> None:
    group = lay(fleet_of(), "zone", 0)
    items = created(group)
    kinds = {i["kind"] for i in items}
    assert kinds == {"Node", "Namespace", "PyTorchJob", "Job"}
    assert all("creationTimestamp" not in i["metadata"] for i in items if i["kind"] == "Node")
    assert all("creationTimestamp" in n["metadata"] for n in group.nodes)


def test_nodewrights_nodes_take_the_observed_slots_in_start_order() -> None:
    spans = {"a": (5.0, 9.0), "b": (0.0, 4.0), "c": (1.0, 6.0)}
    assert slots_of(spans, ["c", "a", "b"]) == {"c": (0.0, 4.0), "a": (1.0, 6.0), "b": (5.0, 9.0)}
    with pytest.raises(ValueError, match="order: 2 nodes for 3 observed slots"):
        slots_of(spans, ["a", "b"])


def simulated_run(group: Group, args: argparse.Namespace, *, workloads: bool) -> LiveRun:
    """A live run whose spans are exactly the simulation's (as if the live nodes took its times)."""
    found = node_workloads(group.pods)
    plan = sim.simulated(
        sim.rollout_spec(args), sim.observations(group.nodes, found if workloads else None), "x"
    )
    wall = ((plan.eta or sim.START) - sim.START).total_seconds()
    node_seconds = max(p.expected_seconds for p in plan.nodes)
    return LiveRun(sim.spans_of(plan), wall, node_seconds, sim.jobs_of(found), 0)


def test_live_spans_equal_to_the_simulations_report_its_figures_in_every_order() -> None:
    args = parse_args(["--nodes", "32", "--max-job-nodes", "8"])
    fleet = training_fleet(sim.shape_of(args))
    zone, aware = (lay(fleet, name, i) for i, name in enumerate(GROUPS))
    live = {
        "zone": simulated_run(zone, args, workloads=False),
        "aware": simulated_run(aware, args, workloads=True),
    }
    lines, data = report(args, fleet, [zone, aware], live, 1.0)
    assert data["live"] == data["simulation"]
    assert [line.rsplit(": ", 1)[-1] for line in lines if ": live " in line] == ["the same"] * 3
    assert [f["order"] for f in data["live"]] == [sim.ZONE_SPREAD, sim.NODEWRIGHT, sim.AWARE]
