"""Campaigns end to end on the workflow tier: three member clusters, each a fake fleet behind a
worker on the member's task queue, one campaign workflow over them. The canary cluster's stage,
its approval, then the other two at once; a node failing in the canary cluster holds the
campaign before any other cluster starts; a stage's fleet gate measures the nodes the campaign
changed in its clusters, halts on a failed check and holds (never fails) without Prometheus."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from fleetwright.api.campaign import Campaign
from fleetwright.local import examples
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.campaign import CampaignWorkflow
from fleetwright.workflows.ids import member_task_queue
from fleetwright.workflows.payloads import CampaignChange, CampaignInput, CampaignProgress
from tests.support.rollouts import SETTINGS
from tests.support.waiting import until
from tests.workflow.fakefleet import FakeFleet, Outage, answer

pytestmark = pytest.mark.workflow

CLUSTERS = ("canary", "east", "west")


XID_CHECK = {
    "name": "xid",
    "query": 'sum(xid{Hostname=~"{{nodes}}"})',
    "successCondition": "result[0] == 0",
    "count": 2,
    "intervalSeconds": 1,
    "consecutiveErrorLimit": 1,
}
GATED: list[dict[str, Any]] = [
    {"name": "canary", "clusters": ["canary"], "checks": ["xid"]},
    {"name": "rest", "clusters": ["east", "west"]},
]
TWO_STAGES: list[dict[str, Any]] = [
    {"name": "canary", "clusters": ["canary"], "approval": True},
    {"name": "rest", "clusters": ["east", "west"]},
]


def campaign(name: str, stages: list[dict[str, Any]], **failure: Any) -> Campaign:
    return Campaign.model_validate(
        {
            "metadata": {"name": name, "generation": 1, "uid": str(uuid.uuid4())},
            "spec": {
                "profile": examples.profile().spec.model_dump(mode="json", by_alias=True, exclude_none=True),
                "policy": {"name": "careful"},
                "clusters": [{"name": c, "kubeconfigSecret": f"{c}-kubeconfig"} for c in CLUSTERS],
                "stages": stages,
                "failure": failure,
                "healthChecks": [XID_CHECK],
            },
        }
    )


@contextlib.asynccontextmanager
async def running(
    client: Client, fleets: dict[str, FakeFleet], stages: list[dict[str, Any]] = TWO_STAGES, **failure: Any
) -> AsyncIterator[WorkflowHandle[CampaignWorkflow, CampaignProgress]]:
    """A campaign over ``fleets`` with a worker for the campaign and one per member cluster."""
    queue = f"tq-{uuid.uuid4()}"
    name = f"c{uuid.uuid4().hex[:8]}"
    given = CampaignInput(
        campaign=campaign(name, stages, **failure), policies={"careful": examples.policy()}, settings=SETTINGS
    )
    handle = await client.start_workflow(CampaignWorkflow.run, given, id=f"campaign/{name}", task_queue=queue)
    async with contextlib.AsyncExitStack() as workers:
        await workers.enter_async_context(build_worker(client, [], task_queue=queue))
        for cluster, fleet in fleets.items():
            member = build_worker(
                client, fleet.activities(), task_queue=member_task_queue(queue, f"{cluster}-kubeconfig")
            )
            await workers.enter_async_context(member)
        try:
            yield handle
        finally:
            await handle.signal(CampaignWorkflow.abort)
            with contextlib.suppress(Exception):
                await handle.result()


async def shows(
    handle: WorkflowHandle[CampaignWorkflow, CampaignProgress],
    predicate: Callable[[CampaignProgress], bool],
    what: str,
) -> CampaignProgress:
    last: list[CampaignProgress | None] = [None]

    async def shown() -> CampaignProgress | None:
        progress = last[0] = await handle.query(CampaignWorkflow.progress)
        return progress if progress is not None and predicate(progress) else None

    progress: CampaignProgress = await until(
        shown, 60.0, f"the campaign to show {what}", interval=0.1, details=lambda: last[0]
    )
    return progress


async def test_the_canary_cluster_then_approval_then_the_other_two_at_once(client: Client) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    async with running(client, fleets) as handle:
        waiting = await shows(handle, lambda p: "waiting for approval" in p.message, "the approval gate")
        assert waiting.clusters["canary"].phase == "Complete"
        assert {waiting.clusters[c].phase for c in ("east", "west")} == {"Pending"}
        assert not fleets["east"].started_stages
        assert not fleets["west"].started_stages
        await handle.execute_update(CampaignWorkflow.approve, "canary")
        done = await shows(handle, lambda p: p.phase == "Complete", "Complete")
    assert {r.phase for r in done.clusters.values()} == {"Complete"}
    assert all(r.updated == 2 for r in done.clusters.values())
    assert all(f.started_stages for f in fleets.values())


async def test_a_node_failing_in_the_canary_cluster_holds_every_cluster(client: Client) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    fleets["canary"].failing_nodes = set(fleets["canary"].nodes)
    async with running(client, fleets) as handle:
        halted = await shows(handle, lambda p: p.phase == "Halted", "Halted")
        assert "failed nodes over the clusters (canary: 1)" in halted.message, halted.message
        assert {halted.clusters[c].phase for c in ("east", "west")} == {"Pending"}
    assert not fleets["east"].started_stages
    assert not fleets["west"].started_stages


async def test_with_action_rollback_a_failure_in_one_cluster_returns_every_started_cluster(
    client: Client,
) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    failing = sorted(fleets["canary"].nodes)[-1]
    # Its change fails; returning it (the uninstall) does not.
    fleets["canary"].fails = lambda r: r.node == failing and not r.stage.startswith("uninstall")
    stages = [{"name": "first", "clusters": ["canary", "east"]}, {"name": "later", "clusters": ["west"]}]
    async with running(client, fleets, stages, action="rollback") as handle:
        done = await shows(handle, lambda p: p.phase == "RolledBack", "RolledBack")
    assert {done.clusters[c].phase for c in ("canary", "east")} == {"RolledBack"}, done
    assert done.clusters["west"].phase == "Pending"
    assert not fleets["west"].started_stages


async def test_a_new_generation_starts_the_stages_over_from_the_first(client: Client) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    async with running(client, fleets) as handle:
        await shows(handle, lambda p: "waiting for approval" in p.message, "the first approval gate")
        await handle.execute_update(CampaignWorkflow.approve, "canary")
        first = await shows(handle, lambda p: p.phase == "Complete", "Complete")
        newer = campaign(first.campaign, TWO_STAGES)
        profile = examples.profile(version="1.1.0").spec.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        update = {
            "metadata": {**newer.metadata.model_dump(), "generation": 2},
            "spec": {**newer.spec.model_dump(by_alias=True), "profile": profile},
        }
        change = CampaignChange(
            campaign=Campaign.model_validate({**newer.model_dump(by_alias=True), **update}),
            policies={"careful": examples.policy()},
        )
        await handle.signal(CampaignWorkflow.spec_changed, change)
        gated = await shows(
            handle, lambda p: p.generation == 2 and "waiting for approval" in p.message, "the gate again"
        )
        assert gated.clusters["canary"].phase == "Complete"
        assert gated.clusters["canary"].generation == 2
        assert {gated.clusters[c].phase for c in ("east", "west")} == {"Pending"}
        assert {r.package.version for r in fleets["canary"].stage_requests} == {"1.0.0", "1.1.0"}
        assert {r.package.version for r in fleets["east"].stage_requests} == {"1.0.0"}
        await handle.execute_update(CampaignWorkflow.approve, "canary")
        done = await shows(handle, lambda p: p.generation == 2 and p.phase == "Complete", "Complete again")
    assert all(r.generation == 2 for r in done.clusters.values())
    assert {r.package.version for r in fleets["west"].stage_requests} == {"1.0.0", "1.1.0"}


async def test_a_stage_fleet_gate_measures_its_clusters_changed_nodes_before_the_next_stage(
    client: Client,
) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    async with running(client, fleets, GATED) as handle:
        done = await shows(handle, lambda p: p.phase == "Complete", "Complete")
    assert {r.phase for r in done.clusters.values()} == {"Complete"}
    # Two measurements (count 2), each over both nodes the canary cluster's rollout changed.
    assert fleets["canary"].gate_measured == [("xid", tuple(sorted(fleets["canary"].nodes)))] * 2
    assert fleets["east"].gate_measured == fleets["west"].gate_measured == []


async def test_a_failed_fleet_gate_check_halts_every_cluster_before_the_next_stage(client: Client) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    fleets["canary"].metric = lambda node, promql: answer(2)  # an XID on a changed node
    async with running(client, fleets, GATED) as handle:
        halted = await shows(handle, lambda p: p.phase == "Halted", "Halted")
    assert "stage canary's fleet gate Failed: canary: xid Failed" in halted.message, halted.message
    assert {halted.clusters[c].phase for c in ("east", "west")} == {"Pending"}
    assert not fleets["east"].started_stages


async def test_a_fleet_gate_without_prometheus_holds_named_and_passes_once_it_answers(client: Client) -> None:
    fleets = {c: FakeFleet(size=2) for c in CLUSTERS}
    outage = Outage()
    fleets["canary"].metric = outage
    async with running(client, fleets, GATED) as handle:
        held = await shows(handle, lambda p: "MonitoringUnavailable" in p.message, "the gate held")
        assert held.phase == "Waiting", held
        assert "canary: xid MonitoringUnavailable" in held.message, held.message
        assert not fleets["east"].started_stages
        outage.down = False
        done = await shows(handle, lambda p: p.phase == "Complete", "Complete")
    assert {r.phase for r in done.clusters.values()} == {"Complete"}
