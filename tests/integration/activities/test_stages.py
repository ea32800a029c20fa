"""The run-stages activity against the real control plane: stage Jobs run by the real Job controller,
adopted on a rerun, kept when they fail, and the reboot wait for a new boot id. Each test uses its
own nodes, namespace and profile name, and calls the activities the way a worker would, through
``ActivityEnvironment``."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import json
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.node import NodeActivities
from fleetwright.activities.payloads import (
    NODE_FINISHED_SIGNAL,
    NodePhase,
    NodeReport,
    NodeResult,
    StageRequest,
    StagesRequest,
    StatusNote,
)
from fleetwright.api.keys import BOOT_ID_BEFORE_ANNOTATION, state_key
from fleetwright.kube import client as kube_client
from fleetwright.kube import jobs as kube_jobs
from fleetwright.kube.jobwatch import JobWatches
from fleetwright.local import nodes as fleet_nodes
from fleetwright.local.kubelet import SimulatedKubelet
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import NodePackageState, PackageRecord, parse_annotation
from fleetwright.planner.rollout.observations import RunStatus
from fleetwright.stagejob.outcome import StageOutcome, StageReport
from tests.support.nodeactivities import condition, get_json, package, stage_request
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import until

pytestmark = pytest.mark.integration


def jobs_in(cluster: ClusterUnderTest, namespace: str) -> list[dict[str, Any]]:
    return list(get_json(cluster, "jobs", "-n", namespace)["items"])


def applied(profile: str) -> NodePackageState:
    """A package state for a stage or a reboot wait to record once it succeeded."""
    return NodePackageState(profile=profile, packages={"tuning": PackageRecord(version="1.0.0")})


def ending(node: str, namespace: str, outcome: str, **fields: Any) -> StageRequest:
    """A stage of ``package()`` on ``node`` whose pod the simulated kubelet ends with ``outcome``
    (``fail``, ``image-pull-backoff``); ``fields``: any other request field."""
    return stage_request(
        node, namespace, package(), pod_labels={"sim.fleetwright.io/outcome": outcome}, **fields
    )


async def run_stage(activities: NodeActivities, request: StageRequest, within: float = 60) -> StageReport:
    """The run-stage activity's report for ``request``, as a worker runs it, within ``within`` s."""
    report: StageReport = await asyncio.wait_for(
        ActivityEnvironment().run(activities.run_stage, request), within
    )
    return report


def recorded(cluster: ClusterUnderTest, node: str, profile: str) -> NodePackageState | None:
    value = get_json(cluster, "node", node)["metadata"]["annotations"].get(state_key(profile))
    return None if value is None else parse_annotation(state_key(profile), value)


async def test_a_stage_job_completes_and_a_rerun_adopts_it(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = stage_request(
        node,
        namespace,
        package(configMap={"sysctl.conf": "vm.swappiness=10\n"}),
        record=applied("act-stage"),
    )
    env = ActivityEnvironment()
    first, second = await asyncio.wait_for(
        asyncio.gather(env.run(activities.run_stage, request), env.run(activities.run_stage, request)), 60
    )
    assert recorded(cluster, node, "act-stage") == applied("act-stage"), "the stage recorded its state"
    again = await env.run(activities.run_stage, request)
    assert first.outcome is StageOutcome.SUCCEEDED
    assert first.job == second.job == again.job
    assert again.succeeded
    assert first.started_at is not None
    assert first.finished_at is not None
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["name"] == first.job
    template = job["spec"]["template"]["spec"]
    assert template["nodeName"] == node
    copier = template["initContainers"][0]
    assert {
        "name": "package-config",
        "mountPath": "/skyhook-package/configmaps/sysctl.conf",
        "subPath": "sysctl.conf",
    } in copier["volumeMounts"]
    config = get_json(cluster, "configmap", "act-stage-tuning-1.0.0", "-n", namespace)
    assert config["data"] == {"sysctl.conf": "vm.swappiness=10\n"}


class RecordedSignals:
    """A client that records the signals sent through it (the node's report to its rollout)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, workflow_id: str) -> Any:
        sent = self.sent

        class Handle:
            async def signal(self, name: str, arg: Any) -> None:
                sent.append((workflow_id, name, arg))

        return Handle()


async def test_stages_retried_after_the_last_one_passed_show_complete_and_report_again(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    """A crash between the last stage's record and what shows after it: the retry runs no stage
    again, and the node still shows Complete and its rollout still hears of it."""
    node = next(spare_nodes)
    result = NodeResult(node=node, target="t", status=RunStatus.SUCCEEDED, message="complete")
    done = StatusNote(
        phase=NodePhase.COMPLETE,
        reason="Complete",
        report=NodeReport(rollout_workflow_id="nodeprofile/act-stage", result=result),
    )
    stage = stage_request(node, namespace, package(), record=applied("act-stage"))
    signals = RecordedSignals()
    env = ActivityEnvironment(client=cast(Client, signals))
    crashed = StagesRequest(profile="act-stage", node=node, stages=(stage,))
    first = await asyncio.wait_for(env.run(activities.run_stages, crashed), 60)
    assert first.passed == 1
    assert not signals.sent
    env.info = dataclasses.replace(env.info, attempt=2)
    retried = crashed.model_copy(update={"stages": (stage.model_copy(update={"show_after": done}),)})
    again = await asyncio.wait_for(env.run(activities.run_stages, retried), 30)
    assert again.resumed == 1
    assert again.passed == 1
    assert (condition(cluster, node, "act-stage") or {}).get("reason") == "Complete"
    assert signals.sent == [("nodeprofile/act-stage", NODE_FINISHED_SIGNAL, result)]
    assert len(jobs_in(cluster, namespace)) == 1


async def test_an_interrupt_stage_runs_the_encoded_interrupt(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = stage_request(node, namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT)
    report = await run_stage(activities, request)
    assert report.succeeded
    [job] = jobs_in(cluster, namespace)
    [agent] = job["spec"]["template"]["spec"]["initContainers"]
    assert agent["args"][0] == "interrupt"
    assert json.loads(base64.b64decode(agent["args"][3])) == {"type": "node_restart"}


async def test_a_reboot_stage_waits_for_the_new_boot_id_and_a_retry_compares_with_the_old_one(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    """The boot id read, the interrupt Job and the reboot wait in one activity: the boot id from
    before the Job is kept on it, so an attempt retried after the reboot does not wait for another."""
    node = next(spare_nodes)
    before, after = fleet_nodes.boot_id(node), fleet_nodes.boot_id(node, generation=1)
    request = stage_request(
        node,
        namespace,
        package(),
        stage=Stage.INTERRUPT,
        interrupt=REBOOT,
        record=applied("act-stage"),
        reboot_timeout_seconds=60,
        show_after=StatusNote(phase=NodePhase.COMPLETE, reason="Complete"),
    )
    env = ActivityEnvironment()
    with SimulatedKubelet(cluster.kubectl, namespace=namespace):
        report = await asyncio.wait_for(env.run(activities.run_stage, request), 90)
    assert report.succeeded
    assert get_json(cluster, "node", node)["status"]["nodeInfo"]["bootID"] == after
    assert recorded(cluster, node, "act-stage") == applied("act-stage"), "recorded once back"
    assert (condition(cluster, node, "act-stage") or {}).get("reason") == "Complete"
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["annotations"][BOOT_ID_BEFORE_ANNOTATION] == before
    again = await asyncio.wait_for(env.run(activities.run_stage, request), 30)  # adopts, is back
    assert again.job == report.job
    assert again.succeeded

    quiet = stage_request(node, namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT)
    quiet = quiet.model_copy(update={"attempt": 1, "reboot_timeout_seconds": 2})
    with pytest.raises(ApplicationError) as failure:  # no simulated kubelet: the node never reboots
        await asyncio.wait_for(env.run(activities.run_stage, quiet), 60)
    assert failure.value.type == "RebootTimeout"
    assert failure.value.non_retryable


async def test_a_failing_stage_is_a_report_and_its_job_is_kept(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = ending(node, namespace, "fail", backoff_limit=0, record=applied("act-stage"))
    report = await run_stage(activities, request)
    assert report.outcome is StageOutcome.FAILED
    assert recorded(cluster, node, "act-stage") is None, "a failed stage records nothing"
    assert "BackoffLimitExceeded" in report.message
    assert "exited 1" in report.message
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["name"] == report.job


async def test_an_image_that_never_pulls_fails_the_stage_after_the_bound(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    request = ending(node, namespace, "image-pull-backoff", image_pull_timeout_seconds=2)
    report = await run_stage(activities, request)
    assert report.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert "ImagePullBackOff" in report.message
    assert "registry.example/fleetwright/packages/tuning:1.0.0" in report.message
    [job] = jobs_in(cluster, namespace)
    assert job["spec"]["suspend"] is True, "the stuck pod must stop pulling"
    again = await run_stage(activities, request, within=10)
    assert again.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert len(jobs_in(cluster, namespace)) == 1


async def test_stages_wait_on_the_shared_job_watch(
    cluster: ClusterUnderTest, spare_nodes: Iterator[str], namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in the worker process: once the watch has listed, a stage reads its Job from the API at
    most once (just created) and never watches it itself; the pod watch sees its pod succeed; a Job
    deleted mid-stage ends the stage."""
    calls: list[str] = []
    for name in ("read_job", "wait_for_job"):
        real = getattr(kube_jobs, name)
        monkeypatch.setattr(kube_jobs, name, functools.partial(_counted, real, name, calls))
    with JobWatches(kube_client.from_kubeconfig(cluster.kubeconfig)) as watches:
        watched = NodeActivities(kube_client.from_kubeconfig(cluster.kubeconfig), job_watches=watches)
        env = ActivityEnvironment()
        first = stage_request(next(spare_nodes), namespace, package())
        assert (await asyncio.wait_for(env.run(watched.run_stage, first), 60)).succeeded
        await until(lambda: watches.of(namespace).synced, 30.0, "the watch to list")
        calls.clear()
        second = stage_request(next(spare_nodes), namespace, package(name="kdump"))
        report = await asyncio.wait_for(env.run(watched.run_stage, second), 60)
        assert report.succeeded
        assert calls.count("wait_for_job") == 0
        assert calls.count("read_job") <= 1
        seen = watches.of(namespace).get(report.job)
        assert seen is not None
        success = watches.of(namespace).succeeded(seen)
        assert success is not None, "the pod watch saw the stage's pod succeed"
        assert success.at is not None

        slow = stage_request(
            next(spare_nodes), namespace, package(name="slow"), pod_annotations=stage_pod_timing(60)
        )
        running = asyncio.ensure_future(env.run(watched.run_stage, slow))
        [job] = await until(
            lambda: [
                j
                for j in jobs_in(cluster, namespace)
                if j["metadata"]["labels"].get("fleetwright.io/package") == "slow"
                and j.get("status", {}).get("active")
            ],
            30.0,
            "the slow stage to run",
        )
        cluster.kubectl("delete", "job", job["metadata"]["name"], "-n", namespace, "--wait=false")
        deleted = await asyncio.wait_for(running, 30)
        assert deleted.outcome is StageOutcome.FAILED
        assert "deleted" in deleted.message


def _counted(real: Callable[..., Any], name: str, calls: list[str], *args: Any) -> Any:
    calls.append(name)
    return real(*args)


async def test_reboot_wait_sees_the_new_boot_id_and_is_bounded(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    """After its interrupt Job, a reboot stage waits for a new boot id (nothing recorded until the
    node is back), and gives up after its bound."""
    node, quiet = next(spare_nodes), next(spare_nodes)
    env = ActivityEnvironment()
    after = fleet_nodes.boot_id(node, generation=1)
    wait = stage_request(
        node,
        namespace,
        package(),
        stage=Stage.INTERRUPT,
        interrupt=REBOOT,
        record=applied("act-reboot"),
        reboot_timeout_seconds=60,
    ).model_copy(update={"profile": "act-reboot"})
    task = asyncio.create_task(env.run(activities.run_stage, wait))
    await until(
        lambda: [j for j in jobs_in(cluster, namespace) if j.get("status", {}).get("succeeded")],
        30.0,
        "the interrupt Job to finish",
    )
    await asyncio.sleep(1)
    assert not task.done()
    assert recorded(cluster, node, "act-reboot") is None
    [job] = jobs_in(cluster, namespace)
    assert job["metadata"]["annotations"][BOOT_ID_BEFORE_ANNOTATION] == fleet_nodes.boot_id(node)
    cluster.kubectl("annotate", "node", node, f"{fleet_nodes.REBOOT_ANNOTATION}={after}")
    assert (await asyncio.wait_for(task, 30)).succeeded
    assert get_json(cluster, "node", node)["status"]["nodeInfo"]["bootID"] == after
    assert recorded(cluster, node, "act-reboot") == applied("act-reboot"), "recorded once back"

    stuck = stage_request(
        quiet,
        namespace,
        package(),
        stage=Stage.INTERRUPT,
        interrupt=REBOOT,
        record=applied("act-reboot"),
        reboot_timeout_seconds=2,
    ).model_copy(update={"profile": "act-reboot"})
    with pytest.raises(ApplicationError) as failure:
        await asyncio.wait_for(env.run(activities.run_stage, stuck), 60)
    assert failure.value.type == "RebootTimeout"
    assert failure.value.non_retryable
    assert recorded(cluster, quiet, "act-reboot") is None


async def test_a_cancelled_wait_stops(
    cluster: ClusterUnderTest, activities: NodeActivities, spare_nodes: Iterator[str], namespace: str
) -> None:
    node = next(spare_nodes)
    env = ActivityEnvironment()
    wait = stage_request(
        node, namespace, package(), stage=Stage.INTERRUPT, interrupt=REBOOT, reboot_timeout_seconds=60
    )
    task = asyncio.create_task(env.run(activities.run_stage, wait))
    await until(
        lambda: [j for j in jobs_in(cluster, namespace) if j.get("status", {}).get("succeeded")],
        30.0,
        "the interrupt Job to finish",
    )
    await asyncio.sleep(1)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 15)
