"""Campaigns on three real local control planes: this tier's cluster (``cluster-1``) and two
member clusters started for the module, each registered by a kubeconfig Secret (a member's: a
token of the chart's worker ServiceAccount, bound to its rules alone); the worker and
the controller as the processes run them (``run_worker`` with its member workers,
``run_controller`` with its campaigns). The canary cluster, its approval, then the other two at
once; a node failing in the canary cluster halts the campaign before any node of the others is
touched; a Campaign deleted while no controller runs is aborted by the next controller."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from fleetwright.api import keys
from fleetwright.api.keys import state_key
from fleetwright.api.packageparts import EnvVar
from fleetwright.local import examples
from fleetwright.local.controlplane import ClusterOptions
from fleetwright.local.members import MemberClusters, cluster_names, member_secret, register
from fleetwright.local.nodes import OUTCOME_LABEL
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.settings import WorkerSettings
from fleetwright.worker.main import run_worker
from fleetwright.workflows.campaign import ABORTED, CampaignWorkflow
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import campaign_workflow_id, member_profile
from fleetwright.workflows.payloads import CampaignProgress
from tests.support.chartrbac import worker_identity, worker_kubeconfig
from tests.support.engine import kubectl_json, label_nodes, simulated_kubelet, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, LOST_WORKER_HEARTBEAT_SECONDS, RunningController, engine_settings
from tests.support.waiting import until

pytestmark = pytest.mark.integration

NODES = 2


@pytest.fixture(scope="module")
def members(cluster: ClusterUnderTest, crds: None) -> Iterator[MemberClusters]:
    """Two more control planes with two simulated nodes each, and this tier's cluster, registered
    for campaigns (the members with the chart's worker identity)."""
    with tempfile.TemporaryDirectory(prefix="fleetwright-members-") as workdir:
        started = MemberClusters(cluster_names(3)[1:], ClusterOptions(nodes=NODES), Path(workdir))
        namespace = engine_settings().package_namespace
        register(cluster.kubectl, namespace, cluster_names(1)[0], cluster.kubeconfig)
        try:
            started.start(cluster.kubectl, namespace)
            # Each member reached as docs/campaigns.md says is enough: an identity bound to the
            # chart's worker rules only (its ServiceAccount's token), never the admin.
            for name, member in started.clusters.items():
                worker_identity(member)
                register(cluster.kubectl, namespace, name, worker_kubeconfig(member, Path(workdir) / name))
            yield started
        finally:
            started.stop()


@contextlib.asynccontextmanager
async def processes(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, engine: EngineSettings
) -> AsyncIterator[WorkerSettings]:
    """The worker (with its member workers) and the controller, in-process, on a queue of their own."""
    settings = WorkerSettings(
        temporal_address=temporal_server.address,
        temporal_namespace=temporal_server.namespace,
        task_queue=unique("campaign"),
        kubeconfig=cluster.kubeconfig,
        engine=engine,
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(settings, stop))
    controller = RunningController(settings)
    controller.start()
    try:
        yield settings
    finally:
        await controller.stop()
        stop.set()
        await asyncio.wait_for(worker, timeout=30)


def apply_campaign(
    cluster: ClusterUnderTest,
    name: str,
    group: str,
    policy: str,
    *,
    approval: bool = True,
    stages: list[dict[str, Any]] | None = None,
    failure: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    profile = examples.profile(selector={GROUP_LABEL: group}).spec
    if env:
        package = profile.packages[0].model_copy(
            update={"env": [EnvVar(name=k, value=v) for k, v in env.items()]}
        )
        profile = profile.model_copy(update={"packages": [package]})
    names = cluster_names(3)
    default = [
        {"name": "canary", "clusters": names[:1], "approval": approval},
        {"name": "rest", "clusters": names[1:]},
    ]
    campaign = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "Campaign",
        "metadata": {"name": name},
        "spec": {
            "profile": profile.model_dump(mode="json", by_alias=True, exclude_none=True),
            "policy": {"name": policy},
            "clusters": [{"name": c, "kubeconfigSecret": member_secret(c)} for c in names],
            "stages": stages or default,
            "failure": failure or {},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(campaign))


def set_up(cluster: ClusterUnderTest, members: MemberClusters) -> tuple[str, str, str, list[str]]:
    """A test's group of nodes in every cluster (NODES new ones here, all of each member's) and its
    DeploymentPolicy: (group label value, campaign name, policy name, this cluster's nodes)."""
    group = unique("grp")
    home_nodes = cluster.add_nodes(NODES)
    label_nodes(cluster, home_nodes, f"{GROUP_LABEL}={group}")
    for member in members.clusters.values():
        member.kubectl("label", "nodes", "--all", f"{GROUP_LABEL}={group}", "--overwrite")
    policy = examples.policy(name=unique("pol"))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(policy.to_k8s()))
    return group, unique("camp"), policy.metadata.name or "", home_nodes


def nodes_of(kubectl: Any, group: str) -> list[dict[str, Any]]:
    listed = kubectl("get", "nodes", "-l", f"{GROUP_LABEL}={group}", "-o", "json")
    items: list[dict[str, Any]] = json.loads(listed.stdout)["items"]
    return items


def touched(kubectl: Any, group: str, profile: str) -> list[str]:
    """The group's nodes the profile's rollout cordoned or recorded state on."""
    return [
        n["metadata"]["name"]
        for n in nodes_of(kubectl, group)
        if n["spec"].get("unschedulable") or state_key(profile) in (n["metadata"].get("annotations") or {})
    ]


def campaign_status(cluster: ClusterUnderTest, name: str) -> dict[str, Any]:
    status: dict[str, Any] = kubectl_json(cluster, "campaign", name).get("status") or {}
    return status


async def shown(
    cluster: ClusterUnderTest, name: str, what: str, holds: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The Campaign's status once ``holds`` (the worker and controller run on this loop: never block it)."""

    async def probe() -> dict[str, Any] | None:
        status = await asyncio.to_thread(campaign_status, cluster, name)
        return status if holds(status) else None

    found: dict[str, Any] = await until(probe, 180, what, interval=1.0)
    return found


async def test_the_canary_cluster_then_approval_then_the_other_two_at_once(
    cluster: ClusterUnderTest,
    members: MemberClusters,
    temporal_server: LocalTemporal,
    temporal_client: Client,
    engine: EngineSettings,
) -> None:
    group, name, policy, _home_nodes = set_up(cluster, members)
    home, *others = cluster_names(3)
    with simulated_kubelet(cluster):
        async with processes(cluster, temporal_server, engine):
            apply_campaign(cluster, name, group, policy)
            status = await shown(
                cluster,
                name,
                "the campaign waiting for approval after the canary cluster",
                lambda s: "waiting for approval" in str(s.get("conditions")),
            )
            phases = {c["name"]: c["phase"] for c in status["clusters"]}
            assert phases == {home: "Complete", **dict.fromkeys(others, "Pending")}, status
            for other in others:
                assert not touched(members.clusters[other].kubectl, group, member_profile(name, other))
            handle = temporal_client.get_workflow_handle(campaign_workflow_id(name))
            await handle.execute_update(CampaignWorkflow.approve, "canary")
            await shown(cluster, name, "the campaign complete", lambda s: s.get("phase") == "Complete")
    for other in others:
        nodes = nodes_of(members.clusters[other].kubectl, group)
        assert all(state_key(member_profile(name, other)) in n["metadata"]["annotations"] for n in nodes)
        assert not any(n["spec"].get("unschedulable") for n in nodes)
    cluster.kubectl("delete", "campaign", name)


async def test_a_node_failing_in_the_canary_cluster_halts_the_campaign_before_any_other_node(
    cluster: ClusterUnderTest,
    members: MemberClusters,
    temporal_server: LocalTemporal,
    engine: EngineSettings,
) -> None:
    group, name, policy, _home_nodes = set_up(cluster, members)
    # Every stage pod fails (the simulated fleet reads the outcome label): the canary cluster's first.
    failing = engine.model_copy(update={"stage_pod_labels": {OUTCOME_LABEL: "fail"}})
    _, *others = cluster_names(3)
    with simulated_kubelet(cluster):
        async with processes(cluster, temporal_server, failing):
            apply_campaign(cluster, name, group, policy)
            status = await shown(cluster, name, "the campaign halted", lambda s: s.get("phase") == "Halted")
            degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
            assert degraded["status"] == "True"
            assert degraded["reason"] == "FailureRuleFired"
            assert "cluster-1: 1" in degraded["message"], degraded
            for other in others:
                assert not touched(members.clusters[other].kubectl, group, member_profile(name, other))
    cluster.kubectl("delete", "campaign", name)


async def test_a_member_whose_api_server_stops_mid_stage_is_named_and_resumes_when_back(
    cluster: ClusterUnderTest,
    members: MemberClusters,
    temporal_server: LocalTemporal,
    engine: EngineSettings,
    tmp_path: Path,
) -> None:
    group, name, policy, _home_nodes = set_up(cluster, members)
    _, stopped, _ = cluster_names(3)
    lost = members.clusters[stopped]
    namespace = engine_settings().package_namespace
    # The stopped member as its admin: a restarted kube-apiserver answers a ServiceAccount 403
    # until its RBAC caches synced, and a 403 is a permanent error (the node would fail); this
    # test is about a server that does not answer at all. The others use the worker's identity.
    register(cluster.kubectl, namespace, stopped, lost.kubeconfig)
    try:
        await _stopped_and_back(cluster, members, temporal_server, engine, (group, name, policy), stopped)
    finally:
        register(cluster.kubectl, namespace, stopped, worker_kubeconfig(lost, tmp_path))


async def _stopped_and_back(
    cluster: ClusterUnderTest,
    members: MemberClusters,
    temporal_server: LocalTemporal,
    engine: EngineSettings,
    campaign: tuple[str, str, str],
    stopped: str,
) -> None:
    group, name, policy = campaign
    lost = members.clusters[stopped]
    profile = member_profile(name, stopped)
    with simulated_kubelet(cluster):
        async with processes(cluster, temporal_server, engine):
            apply_campaign(cluster, name, group, policy, approval=False)
            await until(lambda: touched(lost.kubectl, group, profile), 180, f"a node of {stopped} changed")
            await asyncio.to_thread(lost.kill_component, "kube-apiserver")
            status = await shown(
                cluster,
                name,
                f"{stopped} named unreachable",
                lambda s: any(
                    c["name"] == stopped and c["phase"] == "Unreachable" for c in s.get("clusters", [])
                ),
            )
            unreachable = next(c for c in status["clusters"] if c["name"] == stopped)
            assert "API server unreachable" in unreachable["message"], unreachable
            assert unreachable.get("nodesFailed", 0) == 0
            assert status["phase"] != "Halted"
            await asyncio.to_thread(lost.start_component, "kube-apiserver")
            done = await shown(cluster, name, "the campaign complete", lambda s: s.get("phase") == "Complete")
    assert all(c.get("nodesFailed", 0) == 0 for c in done["clusters"]), done
    assert not [n for n in nodes_of(lost.kubectl, group) if n["spec"].get("unschedulable")]
    cluster.kubectl("delete", "campaign", name)


async def test_with_action_rollback_every_changed_node_of_every_cluster_is_returned(
    cluster: ClusterUnderTest,
    members: MemberClusters,
    temporal_server: LocalTemporal,
    engine: EngineSettings,
) -> None:
    group, name, policy, home_nodes = set_up(cluster, members)
    home, second, later = cluster_names(3)
    # The change fails on this cluster's nodes (their apply stage); returning them does not.
    failing = ",".join(f"apply@{node}" for node in home_nodes)
    with simulated_kubelet(cluster):
        async with processes(cluster, temporal_server, engine):
            apply_campaign(
                cluster,
                name,
                group,
                policy,
                stages=[
                    {"name": "first", "clusters": [home, second]},
                    {"name": "later", "clusters": [later]},
                ],
                failure={"action": "rollback"},
                env={"SIM_FAIL_STAGE_ON": failing},
            )
            done = await shown(
                cluster, name, "the campaign rolled back", lambda s: s.get("phase") == "RolledBack"
            )
    phases = {c["name"]: c["phase"] for c in done["clusters"]}
    assert phases == {home: "RolledBack", second: "RolledBack", later: "Pending"}, done
    for kubectl in (cluster.kubectl, members.clusters[second].kubectl):
        assert not [n["metadata"]["name"] for n in nodes_of(kubectl, group) if n["spec"].get("unschedulable")]
    assert not touched(members.clusters[later].kubectl, group, member_profile(name, later))
    cluster.kubectl("delete", "campaign", name)


def stage_jobs(kubectl: Any, profile: str) -> list[tuple[str, str, str]]:
    """(node, package, stage) of every stage Job the profile's rollout created."""
    namespace = engine_settings().package_namespace
    selector = f"{keys.PROFILE_LABEL}={profile}"
    listed = kubectl("get", "jobs", "-n", namespace, "-l", selector, "-o", "json")
    return [
        (labels[keys.NODE_LABEL], labels[keys.PACKAGE_LABEL], labels[keys.STAGE_LABEL])
        for labels in (j["metadata"]["labels"] for j in json.loads(listed.stdout)["items"])
    ]


async def ended_phase(client: Client, name: str) -> str | None:
    """The phase the campaign's workflow ended with (None while it runs)."""
    described = await client.get_workflow_handle(campaign_workflow_id(name)).describe()
    if described.status == WorkflowExecutionStatus.RUNNING:
        return None
    progress: CampaignProgress = await described.memo_value("progress", type_hint=CampaignProgress)
    return progress.phase


async def test_a_worker_killed_mid_campaign_resumes_with_one_job_per_cluster_node_and_stage(
    cluster: ClusterUnderTest,
    members: MemberClusters,
    temporal_server: LocalTemporal,
    temporal_client: Client,
    engine: EngineSettings,
    tmp_path: Path,
) -> None:
    group, name, policy, _home_nodes = set_up(cluster, members)
    names = cluster_names(3)
    settings = WorkerSettings(
        temporal_address=temporal_server.address,
        temporal_namespace=temporal_server.namespace,
        task_queue=unique("killed"),
        kubeconfig=cluster.kubeconfig,
        engine=engine.model_copy(update={"heartbeat_timeout_seconds": LOST_WORKER_HEARTBEAT_SECONDS}),
    )
    settings_file = tmp_path / "worker.json"
    settings_file.write_text(settings.model_dump_json())

    def worker_process() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "fleetwright.cli.main", "worker"],
            env={**os.environ, "FLEETWRIGHT_SETTINGS": str(settings_file)},
            stdout=(tmp_path / "worker.log").open("ab"),
            stderr=subprocess.STDOUT,
        )

    def changing() -> bool:
        assert first.poll() is None, (tmp_path / "worker.log").read_text()
        return all(
            touched(kubectl, group, member_profile(name, c))
            for c, kubectl in (
                (names[1], members.clusters[names[1]].kubectl),
                (names[2], members.clusters[names[2]].kubectl),
            )
        )

    controller = RunningController(settings)
    first = worker_process()
    try:
        with simulated_kubelet(cluster):
            controller.start()
            try:
                apply_campaign(cluster, name, group, policy, stages=[{"name": "all", "clusters": names}])
                await until(changing, 120, "every member cluster changing", interval=0.5)
                first.send_signal(signal.SIGKILL)
                first.wait()
                second = worker_process()
                try:
                    await shown(
                        cluster, name, "the campaign complete", lambda s: s.get("phase") == "Complete"
                    )
                    # Deleted while no controller runs: the next one to start aborts its workflow.
                    await controller.stop()
                    cluster.kubectl("delete", "campaign", name)
                    controller = RunningController(settings)
                    controller.start()
                    ended = await until(
                        lambda: ended_phase(temporal_client, name), 60, "the deleted campaign aborted"
                    )
                    assert ended == ABORTED
                finally:
                    second.terminate()
                    second.wait(timeout=30)
            finally:
                await controller.stop()
    finally:
        if first.poll() is None:
            first.kill()
    kubectls = {names[0]: cluster.kubectl, **{c: m.kubectl for c, m in members.clusters.items()}}
    for cluster_name, kubectl in kubectls.items():
        jobs = stage_jobs(kubectl, member_profile(name, cluster_name))
        assert jobs, cluster_name
        assert len(jobs) == len(set(jobs)), (cluster_name, sorted(jobs))
        assert {node for node, _, _ in jobs} == {n["metadata"]["name"] for n in nodes_of(kubectl, group)}
