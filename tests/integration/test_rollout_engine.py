"""The rollout engine end to end: real control plane, kwok nodes, real Jobs, the Temporal dev
server, the real activities and workflows (issue 5's integration scenarios)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from fleetwright.api.deploymentpolicy import FailurePolicy
from fleetwright.api.keys import condition_type, status_label_key
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.api.packageparts import EnvVar
from fleetwright.local import examples
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.planner.node.state import read_profile_state
from fleetwright.workflows import search as sa
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.payloads import Progress, RolloutInput, SpecChange
from fleetwright.workflows.rollout import RolloutWorkflow
from tests.support.engine import (
    FAST_PODS,
    JobCreations,
    Sampler,
    cordoned_by,
    engine_worker,
    kubectl_json,
    label_nodes,
    simulated_kubelet,
    unique,
)
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, LOST_WORKER_HEARTBEAT_SECONDS

# observe-and-decide lists NodeProfiles (priority across profiles), so the CRDs must exist.
from tests.support.waiting import until, until_phase, until_progress

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds")]

# The cap test's fleet: a canary, then exponential batches of 1, 2, 4 and 8, the last larger than
# maxUnavailable (5), so the cap, not the batch, limits how many nodes run at once.
CAP_FLEET = 16


def settings(**overrides: Any) -> EngineSettings:
    base: dict[str, Any] = {
        "observe_interval_seconds": 2,
        "ended_check_seconds": 2,
        "stage_pod_annotations": FAST_PODS,
        "stage_backoff_limit": 0,
        "drain_poll_seconds": 0.5,
        "reboot_timeout_seconds": 120,
    }
    return EngineSettings(**{**base, **overrides})


@pytest.fixture
async def engine(cluster: ClusterUnderTest, temporal_client: Client) -> AsyncIterator[str]:
    """An in-process worker on its own task queue; yields the queue name."""
    async with engine_worker(cluster, temporal_client) as queue:
        yield queue


def group(cluster: ClusterUnderTest, count: int) -> tuple[str, list[str]]:
    name = unique("g")
    nodes = cluster.add_nodes(count)
    label_nodes(cluster, nodes, f"{GROUP_LABEL}={name}")
    return name, nodes


async def start(
    client: Client, queue: str, profile: NodeProfile, policy: dict[str, Any], engine_settings: EngineSettings
) -> WorkflowHandle[RolloutWorkflow, Progress]:
    rollout = RolloutInput(profile=profile, policy=examples.policy(**policy), settings=engine_settings)
    return await client.start_workflow(
        RolloutWorkflow.run, rollout, id=rollout_workflow_id(profile.metadata.name), task_queue=queue
    )


def jobs_of(cluster: ClusterUnderTest, profile: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl_json(
        cluster, "jobs", "-n", "fleetwright-system", "-l", f"fleetwright.io/profile={profile}"
    )["items"]
    return items


async def test_canary_soak_exponential_never_exceed_the_cap(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, CAP_FLEET)
    profile = examples.profile(unique("cap"), selector={GROUP_LABEL: name}, interrupt="reboot")
    steps = [
        {"name": "canary", "canary": {"count": 1}},
        {"name": "watch", "soak": {"durationSeconds": 3}},
        {"name": "rest", "batches": {"strategy": "exponential", "initial": 1, "growthFactor": 2}},
    ]
    with (
        simulated_kubelet(cluster),
        Sampler(cordoned_by(cluster, profile.metadata.name, f"{GROUP_LABEL}={name}")) as sampler,
    ):
        handle = await start(
            temporal_client, engine, profile, {"max_unavailable": 5, "steps": steps}, settings()
        )
        done = await until_phase(handle, "Complete", "Halted", within=420)
    assert done.phase == "Complete", done
    assert done.updated == CAP_FLEET
    assert sampler.samples > 20
    assert 1 <= sampler.worst <= 5, f"{sampler.worst} nodes cordoned by us at once"
    annotations = [
        n["metadata"].get("annotations", {})
        for n in kubectl_json(cluster, "nodes")["items"]
        if n["metadata"]["name"] in nodes
    ]
    recorded = [read_profile_state(a, profile.metadata.name).packages.get("tuning") for a in annotations]
    assert len(recorded) == CAP_FLEET
    assert {(r.version, r.pending) if r else None for r in recorded} == {("1.0.0", None)}, recorded[:3]
    assert cordoned_by(cluster, profile.metadata.name, f"{GROUP_LABEL}={name}")() == 0
    # one Job per node and stage: apply, config, interrupt, post-interrupt
    assert len(jobs_of(cluster, profile.metadata.name)) == CAP_FLEET * 4
    await handle.terminate("test done")


async def test_a_failing_canary_halts_with_no_other_node_cordoned_and_shows_everywhere(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 6)
    profile = examples.profile(unique("fail"), selector={GROUP_LABEL: name}, interrupt="reboot")
    failing = settings(stage_pod_labels={"sim.fleetwright.io/outcome": "fail"})
    with Sampler(cordoned_by(cluster, profile.metadata.name, f"{GROUP_LABEL}={name}")) as sampler:
        handle = await start(temporal_client, engine, profile, {"max_unavailable": 3}, failing)
        halted = await until_phase(handle, "Halted", within=120)
    assert halted.failed == 1
    (canary,) = halted.failed_nodes
    assert sampler.worst <= 1
    # The Job is kept, failed, for its logs.
    (job,) = jobs_of(cluster, profile.metadata.name)
    assert job["spec"]["template"]["spec"]["nodeName"] == canary
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"]["conditions"])
    # The node says so: label and condition.
    node = kubectl_json(cluster, "node", canary)
    assert node["metadata"]["labels"][status_label_key(profile.metadata.name)] == "Failed"
    assert any(
        "failed" in c.get("message", "").lower()
        for c in node["status"]["conditions"]
        if c["type"].startswith("fleetwright.io/")
    )
    # And the workflow's search attributes, readable without a worker.
    description = await handle.describe()
    typed = description.typed_search_attributes
    assert typed.get(sa.PHASE) == "Halted"
    assert typed.get(sa.NODES_FAILED) == 1
    others = [n for n in nodes if n != canary]
    assert not any(kubectl_json(cluster, "node", n)["spec"].get("unschedulable") for n in others)
    await handle.terminate("test done")


async def test_a_pdb_that_allows_no_disruption_is_a_visible_wait_until_relaxed(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 1)
    (node,) = nodes
    namespace = unique("train")
    cluster.kubectl("create", "namespace", namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer-0", "namespace": namespace, "labels": {"app": "trainer"}},
        "spec": {"nodeName": node, "containers": [{"name": "train", "image": "registry.example/trainer:1"}]},
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer-pdb", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod, pdb]})
    )
    # force: the workload is a bare pod (no controller), which a drain only evicts when told to.
    profile = examples.profile(
        unique("pdb"), selector={GROUP_LABEL: name}, interrupt="reboot", drain={"force": True}
    )
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]

    def blocked_condition() -> dict[str, Any] | None:
        for condition in kubectl_json(cluster, "node", node)["status"].get("conditions") or []:
            if condition.get("reason") == "DrainBlocked":
                return dict(condition)
        return None

    # An observe interval far beyond the test: the rollout shows the wait because the drain tells
    # it as the wait starts, not because it looked again.
    with simulated_kubelet(cluster):
        handle = await start(
            temporal_client,
            engine,
            profile,
            {"max_unavailable": 1, "steps": steps},
            settings(observe_interval_seconds=3600),
        )
        condition = await until(blocked_condition, 60, "a DrainBlocked condition on the node", interval=0.5)
        assert "trainer-0" in condition["message"]
        assert "trainer-pdb" in condition["message"]
        await until_progress(
            handle, lambda p: "DrainBlocked" in p.blocked_reasons.get(node, ""), "the held drain", within=60
        )
        assert (await handle.query(RolloutWorkflow.progress)).updated == 0  # type: ignore[union-attr]
        cluster.kubectl("delete", "pdb", "trainer-pdb", "-n", namespace)
        done = await until_phase(handle, "Complete", "Halted", within=120)
    assert done.phase == "Complete"
    assert kubectl_json(cluster, "pods", "-n", namespace)["items"] == []
    await handle.terminate("test done")


async def test_upgrade_runs_upgrade_dependencies_in_order_and_a_foreign_cordon_stays(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 3)
    foreign = nodes[2]
    cluster.kubectl("cordon", foreign)
    dependent = {
        "name": "nccl-env",
        "version": "2.0.0",
        "image": "ghcr.io/fleetwright/packages/shellscript",
        "dependsOn": [{"name": "tuning", "version": "1.0.0"}],
        "configMap": {"apply.sh": "true\n", "apply_check.sh": "true\n"},
    }
    profile_name = unique("upg")
    first = examples.profile(
        profile_name, selector={GROUP_LABEL: name}, interrupt=None, extra_packages=[dependent]
    )
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 3}}]
    with JobCreations(cluster, profile_name) as creations:
        handle = await start(
            temporal_client, engine, first, {"max_unavailable": 3, "steps": steps}, settings()
        )
        await until_phase(handle, "Complete", "Halted", within=180)
        await handle.terminate("first version done")
        dependent_v2 = {**dependent, "dependsOn": [{"name": "tuning", "version": "1.1.0"}]}
        second = examples.profile(
            profile_name,
            selector={GROUP_LABEL: name},
            interrupt=None,
            version="1.1.0",
            extra_packages=[dependent_v2],
        )
        handle = await start(
            temporal_client, engine, second, {"max_unavailable": 3, "steps": steps}, settings()
        )
        done = await until_phase(handle, "Complete", "Halted", within=180)
        assert done.phase == "Complete", done
        jobs = creations.ordered(jobs_of(cluster, profile_name))
    by_node: dict[str, list[tuple[str, str, str]]] = {}
    for job in jobs:
        labels = job["metadata"]["labels"]
        annotations = job["metadata"].get("annotations", {})
        by_node.setdefault(labels["fleetwright.io/node"], []).append(
            (
                labels["fleetwright.io/package"],
                annotations.get("fleetwright.io/package-version", ""),
                labels["fleetwright.io/stage"],
            )
        )
    for node in nodes:
        stages = by_node[node]
        tuning_v2 = [s for p, v, s in stages if p == "tuning" and v == "1.1.0"]
        assert tuning_v2 == ["upgrade", "config"], stages
        # every tuning stage of a version precedes the dependent's stages of the matching version
        first_dependent = next(i for i, (p, _, _) in enumerate(stages) if p == "nccl-env")
        assert all(p == "tuning" for p, _, _ in stages[:first_dependent])
    assert kubectl_json(cluster, "node", foreign)["spec"].get("unschedulable") is True
    await handle.terminate("test done")
    cluster.kubectl("uncordon", foreign)


async def test_a_config_change_with_a_reboot_mid_rollout_never_disrupts_two_nodes_at_once(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 5)
    profile_name = unique("cfg")
    reboot_on_sysctl = {"configInterrupts": [{"key": "sysctl.conf", "interrupt": {"type": "reboot"}}]}

    def version(config: str, generation: int) -> NodeProfile:
        built = examples.profile(
            profile_name,
            selector={GROUP_LABEL: name},
            interrupt=None,
            config={"sysctl.conf": config},
            generation=generation,
        )
        package = built.spec.packages[0].model_copy(
            update={"config_interrupts": examples.config_interrupts(reboot_on_sysctl)}
        )
        return built.model_copy(update={"spec": built.spec.model_copy(update={"packages": [package]})})

    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]
    policy: dict[str, Any] = {"max_unavailable": 1, "steps": steps}
    with (
        simulated_kubelet(cluster),
        Sampler(cordoned_by(cluster, profile_name, f"{GROUP_LABEL}={name}"), interval=0.2) as sampler,
    ):
        handle = await start(temporal_client, engine, version("vm.swappiness=10\n", 1), policy, settings())
        await until_progress(
            handle, lambda p: p.updated >= 2 and p.running >= 1, "two nodes updated, one running", within=120
        )
        change = SpecChange(profile=version("vm.swappiness=1\n", 2), policy=examples.policy(**policy))
        await handle.signal(RolloutWorkflow.spec_changed, change)
        done = await until_phase(handle, "Complete", "Halted", within=300)
    assert done.phase == "Complete", done
    assert done.generation == 2
    assert sampler.worst == 1, f"{sampler.worst} nodes disrupted at once"
    wanted = examples.config_digest("vm.swappiness=1\n")
    for node in nodes:
        annotations = kubectl_json(cluster, "node", node)["metadata"]["annotations"]
        record = read_profile_state(annotations, profile_name).packages["tuning"]
        assert record.config == {"sysctl.conf": wanted}, (node, record)
    await handle.terminate("test done")


async def test_a_worker_killed_during_a_drain_loses_nothing_and_runs_no_stage_twice(
    cluster: ClusterUnderTest,
    temporal_server: LocalTemporal,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 3)
    namespace = unique("train")
    cluster.kubectl("create", "namespace", namespace)
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"trainer-{i}", "namespace": namespace, "labels": {"app": "trainer"}},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "train", "image": "registry.example/trainer:1"}],
            },
        }
        for i, node in enumerate(nodes)
    ]
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "all-trainers", "namespace": namespace},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [*pods, pdb]})
    )
    queue = unique("killed")
    settings_file = tmp_path / "worker.json"
    settings_file.write_text(
        json.dumps(
            {
                "temporal_address": temporal_server.address,
                "task_queue": queue,
                "kubeconfig": str(cluster.kubeconfig),
            }
        )
    )

    def worker_process() -> subprocess.Popen[bytes]:
        log = (tmp_path / "worker.log").open("ab")
        return subprocess.Popen(
            [sys.executable, "-m", "fleetwright.cli.main", "worker"],
            env={**os.environ, "FLEETWRIGHT_SETTINGS": str(settings_file)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    profile = examples.profile(
        unique("kill"), selector={GROUP_LABEL: name}, interrupt="reboot", drain={"force": True}
    )
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 1}}]

    def drain_blocked() -> bool:
        return any(
            c.get("reason") == "DrainBlocked"
            for n in nodes
            for c in kubectl_json(cluster, "node", n)["status"].get("conditions") or []
        )

    def blocked_while_alive() -> bool:
        assert first.poll() is None, (tmp_path / "worker.log").read_text()
        return drain_blocked()

    first = worker_process()
    try:
        with simulated_kubelet(cluster):
            lost = settings(heartbeat_timeout_seconds=LOST_WORKER_HEARTBEAT_SECONDS)
            handle = await start(
                temporal_client, queue, profile, {"max_unavailable": 1, "steps": steps}, lost
            )
            await until(blocked_while_alive, 90, "the drain to block", interval=0.5)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = worker_process()
            try:
                cluster.kubectl("delete", "pdb", "all-trainers", "-n", namespace)
                done = await until_phase(handle, "Complete", "Halted", within=300)
            finally:
                second.terminate()
                second.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert done.phase == "Complete", done
    assert done.updated == 3
    jobs = jobs_of(cluster, profile.metadata.name)
    keys = [
        (j["metadata"]["labels"]["fleetwright.io/node"], j["metadata"]["labels"]["fleetwright.io/stage"])
        for j in jobs
    ]
    assert len(keys) == len(set(keys)) == 3 * 4, sorted(keys)
    await handle.terminate("test done")


def failing_upgrade(profile: str, group_name: str) -> tuple[NodeProfile, NodeProfile]:
    """``tuning`` 1.0.0 with a reboot on the group's nodes, then 1.1.0 whose post-interrupt check
    fails on every node: the simulated fleet fails the stage its package's SIM_FAIL_STAGE names
    (stages.yaml), so 1.0.0 passes where 1.1.0 fails."""
    v1 = examples.profile(profile, selector={GROUP_LABEL: group_name}, interrupt="reboot", generation=1)
    built = examples.profile(
        profile, selector={GROUP_LABEL: group_name}, interrupt="reboot", version="1.1.0", generation=2
    )
    failing = built.spec.packages[0].model_copy(
        update={"env": [EnvVar(name="SIM_FAIL_STAGE", value="post-interrupt")]}
    )
    return v1, built.model_copy(update={"spec": built.spec.model_copy(update={"packages": [failing]})})


async def test_a_failing_upgrade_with_a_reboot_rolls_back_every_changed_node_to_the_previous_version(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str
) -> None:
    name, nodes = await asyncio.to_thread(group, cluster, 4)
    profile_name = unique("rb")
    v1, v2 = failing_upgrade(profile_name, name)
    steps = [{"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}]
    base = examples.policy(max_unavailable=2, steps=steps)
    policy = base.model_copy(
        update={"spec": base.spec.model_copy(update={"failure": FailurePolicy(action="rollback")})}
    )
    with (
        simulated_kubelet(cluster),
        Sampler(cordoned_by(cluster, profile_name, f"{GROUP_LABEL}={name}"), interval=0.2) as sampler,
        JobCreations(cluster, profile_name) as creations,
    ):
        rollout = RolloutInput(profile=v1, policy=policy, settings=settings())
        handle = await temporal_client.start_workflow(
            RolloutWorkflow.run, rollout, id=rollout_workflow_id(profile_name), task_queue=engine
        )
        first = await until_phase(handle, "Complete", "Halted", within=240)
        assert first.phase == "Complete", first
        boots = {n: kubectl_json(cluster, "node", n)["status"]["nodeInfo"]["bootID"] for n in nodes}
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=v2, policy=policy))
        rolling = await until_phase(handle, "RollingBack", "Halted", "RolledBack", within=240)
        assert rolling.phase == "RollingBack", rolling
        done = await until_phase(handle, "RolledBack", "Halted", within=300)
        jobs = creations.ordered(jobs_of(cluster, profile_name))
    assert done.phase == "RolledBack", done
    assert done.rolled_back_generation == 2
    assert sampler.worst <= 2, f"{sampler.worst} nodes cordoned by us at once"
    stages: dict[str, list[tuple[str, str]]] = {}
    for job in jobs:
        meta = job["metadata"]
        version = meta.get("annotations", {}).get("fleetwright.io/package-version", "")
        stages.setdefault(meta["labels"]["fleetwright.io/node"], []).append(
            (version, meta["labels"]["fleetwright.io/stage"])
        )
    changed = {n for n, seen in stages.items() if any(v == "1.1.0" for v, _ in seen)}
    assert len(changed) == 2, stages  # the first batch; both failed, the rule fired, nothing else started
    wanted = examples.config_digest(v1.spec.packages[0].config_map["sysctl.conf"])
    for node in nodes:
        manifest = kubectl_json(cluster, "node", node)
        meta = manifest["metadata"]
        record = read_profile_state(meta.get("annotations", {}), profile_name).packages["tuning"]
        assert (record.version, record.config, record.pending) == ("1.0.0", {"sysctl.conf": wanted}, None), (
            node,
            record,
        )
        # A returned node no longer names the rolled-back rollout; the others still name their
        # 1.0.0 install (what a rollback of that rollout would return to).
        assert record.before is None if node in changed else record.before is not None, (node, record)
        assert meta["labels"][status_label_key(profile_name)] == "Complete", node
        assert not manifest["spec"].get("unschedulable"), node
        condition = next(
            c for c in manifest["status"]["conditions"] if c["type"] == condition_type(profile_name)
        )
        assert (condition["status"], condition["reason"]) == ("True", "Complete"), (node, condition)
        back = [s for v, s in stages[node] if v == "1.0.0"][4:] if node in changed else []
        if node in changed:
            # the downgrade: 1.0.0's stages again, its reboot included (a new boot id)
            assert back == ["apply", "config", "interrupt", "post-interrupt"], stages[node]
            assert manifest["status"]["nodeInfo"]["bootID"] != boots[node]
        else:
            assert stages[node] == [(v, s) for v, s in stages[node] if v == "1.0.0"]
    await handle.terminate("test done")


@pytest.mark.parametrize(("action", "phase"), [("rollback", "RolledBack"), ("halt", "Halted")])
async def test_tolerated_failures_filling_the_budget_fire_the_failure_action(
    cluster: ClusterUnderTest, temporal_client: Client, engine: str, action: str, phase: str
) -> None:
    """Issue 37 as a new user met it: two tolerated failures, left cordoned, hold the whole budget of
    two; the rollout fires its action instead of staying Blocked for good."""
    name, nodes = await asyncio.to_thread(group, cluster, 8)
    profile_name = unique("hold")
    v1, v2 = failing_upgrade(profile_name, name)
    base = examples.policy(
        max_unavailable=2, steps=[{"name": "rest", "batches": {"strategy": "fixed", "initial": 2}}]
    )
    failure = FailurePolicy.model_validate({"maxFailedNodes": 2, "action": action})
    policy = base.model_copy(update={"spec": base.spec.model_copy(update={"failure": failure})})
    with simulated_kubelet(cluster):
        rollout = RolloutInput(profile=v1, policy=policy, settings=settings())
        handle = await temporal_client.start_workflow(
            RolloutWorkflow.run, rollout, id=rollout_workflow_id(profile_name), task_queue=engine
        )
        first = await until_phase(handle, "Complete", "Halted", within=300)
        assert first.phase == "Complete", first
        await handle.signal(RolloutWorkflow.spec_changed, SpecChange(profile=v2, policy=policy))
        done = await until_phase(handle, phase, within=300)
    assert done.generation == 2, done
    assert "no node can start: maxUnavailable 2 reached: " in done.message, done.message
    assert "only this rollout's failed nodes hold it (maxFailedNodes 2 tolerates them)" in done.message
    changed = {
        j["metadata"]["labels"]["fleetwright.io/node"]
        for j in jobs_of(cluster, profile_name)
        if j["metadata"].get("annotations", {}).get("fleetwright.io/package-version") == "1.1.0"
    }
    assert len(changed) == 2, changed  # the first batch failed; nothing else started
    wanted = examples.config_digest(v1.spec.packages[0].config_map["sysctl.conf"])
    for node in nodes:
        manifest = kubectl_json(cluster, "node", node)
        record = read_profile_state(manifest["metadata"].get("annotations", {}), profile_name).packages[
            "tuning"
        ]
        cordoned = bool(manifest["spec"].get("unschedulable"))
        if action == "rollback" or node not in changed:
            # returned (or never touched): on 1.0.0 and schedulable
            assert (record.version, record.config, record.pending) == (
                "1.0.0",
                {"sysctl.conf": wanted},
                None,
            ), (
                node,
                record,
            )
            assert not cordoned, node
        else:
            assert record.pending is not None, (node, record)
            assert record.pending.failed, (node, record)  # left to a human
            assert cordoned, node
    await handle.terminate("test done")
