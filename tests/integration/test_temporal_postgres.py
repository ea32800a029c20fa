"""fleetwright on a production-shaped Temporal: temporal-server built from ``go.temporal.io/server``
on PostgreSQL (default store and advanced visibility), with the real worker and controller as
processes (the chaos stack) on the local control plane.

A rollout completes with every chaos invariant holding and is found through fleetwright's search
attributes; then the server is SIGKILLed mid-rollout (stages done behind it, more to run) and
restarted, and the rollout completes with nothing lost: every node updated, exactly one Job per
node and stage, one node workflow run per node."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from fleetwright.chaos.iteration import Fault, Injection, IterationPlan
from fleetwright.chaos.runner import IterationResult, run
from fleetwright.chaos.system import ChaosStack
from fleetwright.cli.chaos import describe
from fleetwright.cli.history import runs
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.temporalserver import TemporalServer
from fleetwright.planner.node.stages import Stage
from fleetwright.process.temporalclient import connect
from fleetwright.workflows import search as sa
from fleetwright.workflows.node import NODE_WORKFLOW
from fleetwright.workflows.rollout import ROLLOUT_WORKFLOW
from tests.support.chaosplans import rebooting_plan
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import until

pytestmark = pytest.mark.integration

NODES = 4
STEPS = (
    {"name": "canary", "canary": {"count": 1}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
)
# The package reboots: four stage Jobs per node.
STAGES = {Stage.APPLY, Stage.CONFIG, Stage.INTERRUPT, Stage.POST_INTERRUPT}
PACKAGE = "tuning@1.0.0"
# The kill lands once the canary's four stages are done and the next batch has begun.
KILL_AFTER_JOBS = len(STAGES) + 1


def plan(index: int, *injections: Injection) -> IterationPlan:
    return rebooting_plan(26, index, NODES, STEPS, *injections)


@pytest.fixture(scope="module")
def stack(cluster: ClusterUnderTest, postgres_temporal: TemporalServer) -> Iterator[ChaosStack]:
    assert isinstance(cluster, LocalCluster), "the chaos stack needs the local provider"
    with ChaosStack(attached=(cluster, postgres_temporal)) as running:
        yield running


def run_one(stack: ChaosStack, iteration: IterationPlan) -> IterationResult:
    results: list[IterationResult] = []
    run(stack, [iteration], report=results.append)
    [result] = results
    return result


def assert_updated_once(result: IterationResult) -> None:
    """Complete, no invariant broken, and each node ran each stage in exactly one Job."""
    report = describe(result) + "".join(f"\n    {v}" for v in result.violations)
    assert result.phase == "Complete", report
    assert not result.violations, report
    assert result.final is not None
    jobs = Counter((job.node, job.stage) for job in result.final.jobs if job.profile == result.profile)
    nodes = {node.name for node in result.final.nodes}
    assert len(nodes) == NODES, nodes
    assert jobs == Counter({(node, stage.value): 1 for node in nodes for stage in STAGES}), report


@dataclass(frozen=True)
class Visible:
    """What visibility (PostgreSQL advanced visibility) shows of one rollout."""

    runs: dict[str, list[str]]
    """Each node's runs found by ``fleetwright history``'s query (FleetwrightNode): status,
    FleetwrightPhase and FleetwrightPackages."""
    nodes_complete: int
    """Node workflows found by FleetwrightProfile, FleetwrightPhase and FleetwrightPackages."""
    rollouts_done: int
    """Rollout workflows found by FleetwrightProfile and FleetwrightNodesDone."""

    @property
    def settled(self) -> bool:
        each_once = all(v == [f"COMPLETED Complete {PACKAGE}"] for v in self.runs.values())
        return each_once and self.nodes_complete == NODES and self.rollouts_done == 1


async def read_visible(server: TemporalServer, result: IterationResult) -> Visible:
    client = await connect(server.address, server.namespace)
    assert result.final is not None
    found: dict[str, list[str]] = {}
    for node in result.final.nodes:
        runs_there = [r for r in await runs(client, node.name) if r.profile == result.profile]
        found[node.name] = [f"{r.status} {r.phase} {','.join(r.packages)}" for r in runs_there]
    profile = f'{sa.PROFILE.name} = "{result.profile}"'
    nodes = (
        f'WorkflowType = "{NODE_WORKFLOW}" AND {profile} AND {sa.PHASE.name} = "Complete" '
        f'AND {sa.PACKAGES.name} = "{PACKAGE}"'
    )
    rollouts = f'WorkflowType = "{ROLLOUT_WORKFLOW}" AND {profile} AND {sa.NODES_DONE.name} = {NODES}'
    return Visible(
        runs=found,
        nodes_complete=(await client.count_workflows(nodes)).count,
        rollouts_done=(await client.count_workflows(rollouts)).count,
    )


def visible(server: TemporalServer, result: IterationResult, within: float = 30.0) -> Visible:
    """What visibility shows once it has caught up (its records are written asynchronously)."""
    seen: list[Visible] = []

    async def settled() -> Visible | None:
        seen.append(await read_visible(server, result))
        return seen[-1] if seen[-1].settled else None

    what = "visibility to show every run once and the rollout done"
    shown: Visible = asyncio.run(until(settled, within, what, interval=1.0, details=lambda: seen[-1:]))
    return shown


@pytest.mark.timeout(600)
def test_a_rollout_completes_on_postgresql_and_is_found_by_its_search_attributes(
    stack: ChaosStack, postgres_temporal: TemporalServer
) -> None:
    result = run_one(stack, plan(0))
    assert_updated_once(result)
    seen = visible(postgres_temporal, result)
    assert seen.settled, seen


@pytest.mark.timeout(600)
def test_the_server_killed_mid_rollout_loses_nothing(
    stack: ChaosStack, postgres_temporal: TemporalServer
) -> None:
    killed = postgres_temporal.process.pid
    kill = Injection(Fault.KILL_TEMPORAL, at=0.0, pause=2.0, after_jobs=KILL_AFTER_JOBS)
    result = run_one(stack, plan(1, kill))
    [injected] = result.injected
    assert injected.fault is Fault.KILL_TEMPORAL
    assert postgres_temporal.process.pid != killed, "the server was not restarted"
    # Mid-rollout: stages were done before the kill and Jobs were still to be created after it.
    assert KILL_AFTER_JOBS <= injected.jobs_before < NODES * len(STAGES), describe(result)
    assert_updated_once(result)
    seen = visible(postgres_temporal, result)
    assert seen.settled, seen
