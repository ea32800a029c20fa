"""The interruption benchmarks' training fleets (``local.trainingfleet``): seeded, replaced nodes
created later, placements that never share a node, and pods whose owner references
``kube.workloads`` traces to one workload per job."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwright.kube.workloads import node_workloads
from fleetwright.local.nodes import NODES_PER_RACK, RACK_LABEL
from fleetwright.local.trainingfleet import (
    BROUGHT_UP,
    GPUS_PER_NODE,
    FleetShape,
    TrainingFleet,
    _free_nodes,
    training_fleet,
)
from fleetwright.planner.rollout.observations import NodeWorkload

pytestmark = pytest.mark.unit

SHAPES = [
    FleetShape(nodes=256, placement="over-time", max_job_nodes=64, seed=3),
    FleetShape(nodes=256, placement="packed", max_job_nodes=16, seed=4),
]


def created(fleet: TrainingFleet) -> dict[str, datetime]:
    return {
        n["metadata"]["name"]: datetime.fromisoformat(n["metadata"]["creationTimestamp"]) for n in fleet.nodes
    }


@pytest.mark.parametrize("shape", SHAPES)
def test_the_same_seed_gives_the_same_fleet_and_another_seed_another(shape: FleetShape) -> None:
    first, again = training_fleet(shape), training_fleet(shape)
    assert (first.nodes, first.pods, first.jobs) == (again.nodes, again.pods, again.jobs)
    other = training_fleet(replace(shape, seed=shape.seed + 1))
    assert (other.jobs, created(other)) != (first.jobs, created(first))


@pytest.mark.parametrize("percent", [0, 10, 30])
def test_replaced_nodes_are_created_after_the_bring_up(percent: int) -> None:
    fleet = training_fleet(FleetShape(nodes=200, replaced_percent=percent, seed=7))
    times = created(fleet)
    later = [name for name, at in times.items() if at != BROUGHT_UP]
    assert len(later) == round(200 * percent / 100)
    assert all(times[name] > BROUGHT_UP for name in later)
    if percent:  # created out of rack (name) order
        assert sorted(times, key=lambda n: (times[n], n)) != sorted(times)


@pytest.mark.parametrize("seed", range(8))
def test_jobs_placed_over_time_never_share_a_node_and_keep_the_idle_share(seed: int) -> None:
    shape = FleetShape(nodes=256, idle_percent=10, max_job_nodes=64, seed=seed)
    fleet = training_fleet(shape)
    held = Counter(node for job in fleet.jobs for node in job.nodes)
    assert held
    assert max(held.values()) == 1
    assert sum(held.values()) <= 256 * 90 // 100


def test_over_time_jobs_land_on_scattered_racks_packed_ones_never() -> None:
    def scattered(fleet: TrainingFleet) -> int:
        """Jobs whose racks are not one run of consecutive racks."""
        rack = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in fleet.nodes}
        count = 0
        for job in fleet.jobs:
            racks = sorted({int(rack[n].removeprefix("rack-")) for n in job.nodes})
            count += racks[-1] - racks[0] + 1 != len(racks)
        return count

    assert scattered(training_fleet(FleetShape(nodes=512, placement="over-time"))) > 0
    assert scattered(training_fleet(FleetShape(nodes=512, placement="packed"))) == 0


def test_the_scheduler_takes_only_free_nodes_whole_racks_first() -> None:
    free = [set(range(8)), {8, 9, 10}, set(range(16, 24)), {24}]
    taken = _free_nodes(free, 11)
    assert taken == (*range(8), 8, 9, 10)  # a whole rack, then the rack that fits the rest exactly
    assert free == [set(), set(), set(range(16, 24)), {24}]
    spread = _free_nodes(free, 9)  # no rack holds 9: a whole rack, then the last free node
    assert spread == (*range(16, 24), 24)
    assert free == [set()] * 4


def test_owner_references_resolve_to_one_workload_per_job() -> None:
    fleet = training_fleet(FleetShape(nodes=256, max_job_nodes=64, seed=11))
    found = node_workloads(fleet.pods)
    expected = {
        node: (NodeWorkload(name=job.workload, pods=1, gpus=GPUS_PER_NODE),)
        for job in fleet.jobs
        for node in job.nodes
    }
    assert found == expected  # the DaemonSet pod on every node is no workload
    kinds = {job.workload.split("/")[0] for job in fleet.jobs if len(job.nodes) > 1}
    assert kinds == {"PyTorchJob"}
    assert {job.workload.split("/")[0] for job in fleet.jobs if len(job.nodes) == 1} == {"Job"}
    for pod in fleet.pods:
        assert not pod["metadata"].get("labels")  # traced by owner, no gang label
        (owner,) = pod["metadata"]["ownerReferences"]
        assert owner["controller"] is True


@given(
    free=st.lists(st.sets(st.integers(0, NODES_PER_RACK - 1)), min_size=1, max_size=6),
    share=st.floats(0, 1),
)
def test_the_scheduler_never_hands_out_a_node_that_is_not_free(free: list[set[int]], share: float) -> None:
    racks = [{rack * NODES_PER_RACK + i for i in nodes} for rack, nodes in enumerate(free)]
    before = set().union(*racks)
    size = round(len(before) * share)
    taken = _free_nodes(racks, size)
    assert len(set(taken)) == len(taken) == size
    assert set(taken) <= before
    assert set().union(*racks) == before - set(taken)
