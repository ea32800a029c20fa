"""Records the workflow histories a release freezes: run once, when the release is cut, as
``.venv/bin/python -m tests.workflow.record_histories 0.2.0``, and commit
``tests/workflow/histories/0.2.0/``. A release's histories are never recorded again (it refuses
a version whose folder exists): the replay test holds every later change to them
(docs/upgrading.md).

The scenarios cover every path a running workflow can be in when fleetwright is upgraded: a
rollout waiting at an approval gate, soaking, between batches, halted, rolling back, aborted,
continued as new, paused and given a new spec, retrying and skipping nodes, being deleted, held by
a soak whose Prometheus does not answer, rolled back with a hardware-suspect node kept out; a node
mid-stage, waiting for its reboot, failed, aborted, held at its gate (Inconclusive,
MonitoringUnavailable) and quarantined. Open workflows are recorded where they
wait (that is what an upgrade replays), closed ones to their end. They run on the Temporal dev
server with the in-memory fleet of the workflow tier (``fakefleet``)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fleetwright.api.keys import NodeReason
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.binaries import wheel_binary
from fleetwright.errors import PrometheusUnavailableError
from fleetwright.local import examples
from fleetwright.planner.node.packages import config_digests
from fleetwright.planner.node.state import NodePackageState, PackageRecord, format_annotation
from fleetwright.process.shutdown import run_and_exit
from fleetwright.worker.temporalworker import build_worker
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import node_workflow_id
from fleetwright.workflows.payloads import Deletion, Progress, RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.waiting import until, until_progress
from tests.workflow.fakefleet import FakeFleet, answer

HISTORIES = Path(__file__).parent / "histories"
SETTINGS = EngineSettings(observe_interval_seconds=60, search_attributes=False)
CANARY_GATE_BATCHES = [
    {"name": "canary", "canary": {"count": 1}},
    {"name": "gate", "approval": {}},
    {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
]

Rollout = WorkflowHandle[RolloutWorkflow, Progress]


class Recorder:
    """Runs the scenarios against one server and writes each history into one release folder."""

    def __init__(self, client: Client, folder: Path) -> None:
        self.client = client
        self.folder = folder
        self.queues: list[str] = []
        """The task queue of each scenario run so far: every workflow it started runs there."""

    async def save(self, handle: WorkflowHandle[Any, Any], name: str) -> None:
        history = await handle.fetch_history()
        (self.folder / f"{name}.json").write_text(history.to_json())
        print(f"recorded {name} ({len(history.events)} events)")

    async def save_node(self, profile: str, node: str, name: str) -> None:
        await self.save(self.client.get_workflow_handle(node_workflow_id(profile, node)), name)

    async def run(
        self, fleet: FakeFleet, rollout: RolloutInput, scenario: Callable[[Rollout], Awaitable[None]]
    ) -> None:
        queue = f"record-{uuid.uuid4().hex[:8]}"
        self.queues.append(queue)
        handle = await self.client.start_workflow(
            RolloutWorkflow.run, rollout, id=f"nodeprofile/{rollout.profile.metadata.name}", task_queue=queue
        )
        async with build_worker(self.client, fleet.activities(), task_queue=queue):
            await scenario(handle)
            with_result = await handle.describe()
            if with_result.status is not None and with_result.status.name == "RUNNING":
                await handle.terminate("recorded")


def rollout(name: str, **policy: Any) -> RolloutInput:
    return RolloutInput(
        profile=examples.profile(name=name), policy=examples.policy(**policy), settings=SETTINGS
    )


def complete(fleet: FakeFleet, count: int) -> Callable[[], bool]:
    return lambda: list(fleet.statuses.values()).count("Complete") == count


async def gate(rec: Recorder) -> None:
    """Canary, then waiting at the gate; approved, the rest; then aborted once complete."""
    fleet = FakeFleet(size=3)

    async def scenario(handle: Rollout) -> None:
        await until_progress(handle, lambda p: "awaiting approval" in p.message, "the gate")
        await rec.save(handle, "rollout-waiting-at-gate")
        await rec.save_node("gate", fleet.started_nodes()[0], "node-reboot-complete")
        await handle.execute_update(RolloutWorkflow.approve, "rollout/gate")
        await until_progress(handle, lambda p: p.phase == "Complete" and p.updated == 3, "completion")
        await rec.save(handle, "rollout-complete-idle")
        await handle.signal(RolloutWorkflow.abort)
        await handle.result()
        await rec.save(handle, "rollout-gate-approved-aborted")

    await rec.run(fleet, rollout("gate", max_unavailable=2, steps=CANARY_GATE_BATCHES), scenario)


async def soak(rec: Recorder) -> None:
    """A soak of an hour after the canary: recorded while it soaks."""
    fleet = FakeFleet(size=3)
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 3600}},
        {"name": "rest", "batches": {"strategy": "exponential", "initial": 1}},
    ]

    async def scenario(handle: Rollout) -> None:
        await until(complete(fleet, 1), 60.0, "the canary", interval=0.05, blocking=False)
        await until_progress(handle, lambda p: p.updated == 1 and "soak" in p.message.lower(), "the soak")
        await rec.save(handle, "rollout-soaking")

    await rec.run(fleet, rollout("soak", max_unavailable=2, steps=steps), scenario)


async def batches_mid_stage(rec: Recorder) -> None:
    """Batches with their nodes held mid-stage (a reboot profile: cordoned, drained, in the
    stages activity that waits out the reboot), then paused, given a new generation, resumed."""
    fleet = FakeFleet(size=5, held_profiles={"batches"})
    steps = [{"name": "all", "batches": {"strategy": "linear", "initial": 1, "delta": 1}}]
    start = rollout("batches", max_unavailable=2, steps=steps)

    async def scenario(handle: Rollout) -> None:
        await until(lambda: bool(fleet.started_stages), 60.0, "a stage", interval=0.05, blocking=False)
        node = fleet.started_stages[0][0]
        await rec.save_node("batches", node, "node-mid-stage-reboot")
        await rec.save(handle, "rollout-node-mid-stage")
        await handle.signal(RolloutWorkflow.pause)
        fleet.release.set()
        await until_progress(handle, lambda p: p.paused and p.running == 0, "the pause")
        newer = examples.profile(name="batches", version="1.1.0", generation=2)
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=newer, policy=start.policy))
        await handle.signal(RolloutWorkflow.resume)
        await until(
            lambda: any(r.package.version == "1.1.0" for r in fleet.stage_requests),
            60.0,
            "1.1.0",
            interval=0.05,
            blocking=False,
        )
        await until_progress(handle, lambda p: p.phase == "Complete" and p.updated == 5, "completion")
        await rec.save(handle, "rollout-paused-new-spec-complete")

    await rec.run(fleet, start, scenario)


async def failures(rec: Recorder) -> None:
    """A failing canary halts the rollout; it is retried (fails again), then skipped."""
    fleet = FakeFleet(size=3)
    fleet.fails = lambda request: True

    async def scenario(handle: Rollout) -> None:
        await until_progress(handle, lambda p: p.phase == "Halted", "the halt")
        (canary,) = fleet.started_nodes()
        await rec.save(handle, "rollout-halted")
        await rec.save_node("failures", canary, "node-stage-failed")
        await handle.execute_update(RolloutWorkflow.retry_node, canary)
        await until(
            lambda: fleet.started_stages.count((canary, "apply")) == 2,
            60.0,
            "the retry",
            interval=0.05,
            blocking=False,
        )
        await until_progress(handle, lambda p: p.phase == "Halted", "the second halt")
        fleet.fails = None
        await handle.execute_update(RolloutWorkflow.skip_node, canary)
        await until_progress(handle, lambda p: p.phase == "Complete" and p.updated == 2, "completion")
        await rec.save(handle, "rollout-retried-skipped-complete")

    await rec.run(fleet, rollout("failures", max_unavailable=2), scenario)


async def rollback(rec: Recorder) -> None:
    """1.0.0 -> 1.1.0 on three nodes whose canary fails: rolled back, then aborted."""
    fleet = FakeFleet(size=3)
    old = examples.profile(name="rollback", version="1.0.0", generation=1)
    config = config_digests(old.spec.packages[0].config_map)
    for node in fleet.nodes:
        state = NodePackageState(
            profile="rollback", packages={"tuning": PackageRecord(version="1.0.0", config=config)}
        )
        key, value = format_annotation(state)
        fleet.annotations(node)[key] = value
    fleet.fails = lambda request: request.package.version == "1.1.0"
    policy = examples.policy(max_unavailable=2)
    failure = policy.spec.failure.model_copy(update={"action": "rollback"})
    start = RolloutInput(
        profile=examples.profile(name="rollback", version="1.1.0", generation=2),
        policy=policy.model_copy(update={"spec": policy.spec.model_copy(update={"failure": failure})}),
        previous=old,
        settings=SETTINGS,
    )

    async def scenario(handle: Rollout) -> None:
        await until(
            lambda: any(r.package.version == "1.0.0" for r in fleet.stage_requests),
            60.0,
            "the rollback",
            interval=0.05,
            blocking=False,
        )
        await until(
            lambda: "Complete" in fleet.statuses.values(),
            60.0,
            "the rolled back node",
            interval=0.05,
            blocking=False,
        )
        await rec.save(handle, "rollout-rolled-back")
        await handle.signal(RolloutWorkflow.abort)
        await handle.result()
        await rec.save(handle, "rollout-rollback-abort")

    await rec.run(fleet, start, scenario)


async def abort_mid_batch(rec: Recorder) -> None:
    """An abort while two nodes run: they finish their stage, start no other, and end Aborted."""
    fleet = FakeFleet(size=4, hold_stages=True)
    steps = [{"name": "all", "batches": {"strategy": "fixed", "initial": 2}}]

    async def scenario(handle: Rollout) -> None:
        await until(
            lambda: len(fleet.started_nodes()) == 2, 60.0, "two running nodes", interval=0.05, blocking=False
        )
        await handle.signal(RolloutWorkflow.abort)
        fleet.release.set()
        await handle.result()
        await rec.save(handle, "rollout-aborted-mid-batch")
        await rec.save_node("aborting", fleet.started_nodes()[0], "node-aborted")

    await rec.run(fleet, rollout("aborting", max_unavailable=2, steps=steps), scenario)


async def continued(rec: Recorder) -> None:
    """A rollout whose history passes its bound continues as new: both runs are recorded."""
    fleet = FakeFleet(size=16)
    settings = SETTINGS.model_copy(
        update={"history_events_before_continue": 100, "ended_check_seconds": 3600}
    )
    start = RolloutInput(
        profile=examples.profile(name="continued", interrupt=None),
        policy=examples.policy(max_unavailable=2),
        settings=settings,
    )

    async def scenario(handle: Rollout) -> None:
        first = (await handle.describe()).run_id
        await until(complete(fleet, 16), 60.0, "every node", interval=0.05, blocking=False)
        latest = rec.client.get_workflow_handle(handle.id)

        async def continued_as_new() -> bool:
            return (await latest.describe()).run_id != first

        await until(continued_as_new, 60.0, "the rollout continuing as new")
        await rec.save(rec.client.get_workflow_handle(handle.id, run_id=first), "rollout-continued-first-run")
        await rec.save(latest, "rollout-continued-latest-run")
        await latest.terminate("recorded")

    await rec.run(fleet, start, scenario)


async def deletion(rec: Recorder) -> None:
    """A complete rollout whose NodeProfile is deleted: uninstalled, cleaned up, Deleted."""
    fleet = FakeFleet(size=2)
    manifest = examples.profile(name="deleted", interrupt=None).model_dump(by_alias=True, mode="json")
    manifest["spec"]["packages"][0]["uninstall"] = {"enabled": True}
    profile = NodeProfile.model_validate(manifest)
    start = RolloutInput(profile=profile, policy=examples.policy(max_unavailable=2), settings=SETTINGS)

    async def scenario(handle: Rollout) -> None:
        await until_progress(handle, lambda p: p.phase == "Complete" and p.updated == 2, "completion")
        await handle.signal(RolloutWorkflow.delete, Deletion(profile=profile, policy=None))
        await handle.result()
        await rec.save(handle, "rollout-deleted")

    await rec.run(fleet, start, scenario)


XID = {
    "name": "xid",
    "query": 'changes(DCGM_FI_DEV_XID_ERRORS{Hostname="{{node}}"}[5m])',
    "successCondition": "all(r == 0 for r in result)",
    "failureCondition": "any(r > 0 for r in result)",
    "count": 1,
    "intervalSeconds": 1,
    "consecutiveErrorLimit": 1,
}


def health(name: str, spec: dict[str, Any], **policy: Any) -> RolloutInput:
    """A rollout whose policy also carries ``spec`` (health checks, a node gate, a failure rule)."""
    deployment = examples.policy(**policy)
    merged = deployment.spec.model_dump(by_alias=True, exclude_none=True) | spec
    validated = deployment.model_copy(update={"spec": type(deployment.spec).model_validate(merged)})
    return RolloutInput(
        profile=examples.profile(name=name, interrupt="reboot"), policy=validated, settings=SETTINGS
    )


def unreachable(node: str, promql: str) -> Any:
    raise PrometheusUnavailableError("Prometheus at http://127.0.0.1:1 unreachable: MaxRetryError")


async def node_gate_held(rec: Recorder) -> None:
    """Two nodes held at their gates: one Inconclusive (no data), one MonitoringUnavailable."""
    fleet = FakeFleet(size=2)
    fleet.metric = lambda node, promql: answer() if node == "gpu-node-0000" else unreachable(node, promql)
    gate = {"healthChecks": [XID], "nodeGate": {"checks": ["xid"]}, "failure": {"maxFailedNodes": 0}}
    held = {"gpu-node-0000": NodeReason.GATE_INCONCLUSIVE, "gpu-node-0001": NodeReason.MONITORING_UNAVAILABLE}

    async def scenario(handle: Rollout) -> None:
        await until(
            lambda: all(fleet.reasons.get(n) == r for n, r in held.items()),
            60.0,
            "both holds",
            details=lambda: fleet.reasons,
        )
        await rec.save_node("gate-held", "gpu-node-0000", "node-gate-inconclusive")
        await rec.save_node("gate-held", "gpu-node-0001", "node-gate-monitoring-unavailable")
        await rec.save(handle, "rollout-node-gate-held")

    together = [{"name": "all", "batches": {"strategy": "fixed", "initial": 2}}]
    await rec.run(fleet, health("gate-held", gate, max_unavailable=2, steps=together), scenario)


async def quarantine(rec: Recorder) -> None:
    """A node fails its gate under rollback: the batch is returned, the node re-gated on the
    returned version, fails again and stays cordoned, hardware suspect."""
    fleet = FakeFleet(size=4)
    bad = "gpu-node-0002"
    fleet.metric = lambda node, promql: answer(5) if node == bad else answer(0)
    gate = {
        "healthChecks": [XID],
        "nodeGate": {"checks": ["xid"]},
        "failure": {"maxFailedNodes": 0, "action": "rollback"},
    }

    async def scenario(handle: Rollout) -> None:
        await until_progress(handle, lambda p: p.phase == "RolledBack", "the rollback")
        await until(lambda: fleet.reasons.get(bad) == NodeReason.HARDWARE_SUSPECT, 60.0, "the suspect")
        await rec.save(handle, "rollout-rolled-back-hardware-suspect")
        await rec.save_node("quarantine", bad, "node-hardware-suspect")

    await rec.run(fleet, health("quarantine", gate, max_unavailable=2), scenario)


async def soak_monitoring_unavailable(rec: Recorder) -> None:
    """A soak whose fleet gate finds Prometheus unreachable: held, named, measuring on."""
    fleet = FakeFleet(size=3)
    fleet.metric = unreachable
    check = {
        **XID,
        "name": "fleet-xid",
        "query": 'sum(changes(DCGM_FI_DEV_XID_ERRORS{Hostname=~"{{nodes}}"}[5m]))',
        "successCondition": "result[0] == 0",
        "failureCondition": "result[0] > 0",
    }
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 1, "checks": ["fleet-xid"]}},
        {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
    ]
    spec = {"healthChecks": [check], "failure": {"maxFailedNodes": 0, "action": "rollback"}}

    async def scenario(handle: Rollout) -> None:
        await until_progress(handle, lambda p: "MonitoringUnavailable" in p.message, "the held soak")
        await rec.save(handle, "rollout-soak-monitoring-unavailable")

    await rec.run(fleet, health("soak-held", spec, max_unavailable=2, steps=steps), scenario)


SCENARIOS = (
    gate,
    soak,
    batches_mid_stage,
    failures,
    rollback,
    abort_mid_batch,
    continued,
    deletion,
    node_gate_held,
    quarantine,
    soak_monitoring_unavailable,
)


async def record(folder: Path) -> None:
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter, dev_server_existing_path=str(wheel_binary("temporal"))
    )
    try:
        recorder = Recorder(env.client, folder)
        for scenario in SCENARIOS:
            await scenario(recorder)
    finally:
        await env.shutdown()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.workflow.record_histories VERSION")
    folder = HISTORIES / sys.argv[1]
    if folder.exists():
        sys.exit(f"{folder} exists: a release's histories are frozen, never recorded again")
    folder.mkdir(parents=True)
    asyncio.run(record(folder))


if __name__ == "__main__":
    # The SDK runtime's threads outlive the environment: end as the fleetwright commands do, without
    # the interpreter finalization they can abort.
    run_and_exit(main)
