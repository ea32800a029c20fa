"""The node activities on a real Temporal worker (dev server, pydantic data converter): they register
under their explicit names, their payloads round-trip, a permanent failure arrives as a typed,
non-retryable error, and a stage retried by Temporal adopts its Job instead of making another."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from fleetwright.activities.node import all_activities
from fleetwright.activities.payloads import (
    NAMES,
    CordonReport,
    NodeTarget,
    StageRequest,
    StagesReport,
    StagesRequest,
)
from fleetwright.api.nodeprofile import Package
from fleetwright.kube import client as kube_client
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.planner.node.interrupts import REBOOT
from fleetwright.planner.node.stages import Stage
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration

QUICK = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3)


@workflow.defn(name="test.activities-smoke")
class Smoke:
    @workflow.run
    async def run(self, target: NodeTarget) -> list[Any]:
        cordon = await workflow.execute_activity(
            NAMES.CORDON, target, result_type=CordonReport, start_to_close_timeout=timedelta(seconds=30)
        )
        uncordoned = await workflow.execute_activity(
            NAMES.UNCORDON, target, result_type=bool, start_to_close_timeout=timedelta(seconds=30)
        )
        return [cordon, uncordoned]


@workflow.defn(name="test.activities-reboot-timeout")
class RebootTimeout:
    @workflow.run
    async def run(self, request: StagesRequest) -> StagesReport:
        result: StagesReport = await workflow.execute_activity(
            NAMES.RUN_STAGES,
            request,
            result_type=StagesReport,
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=timedelta(seconds=6),
            retry_policy=QUICK,
        )
        return result


@workflow.defn(name="test.activities-stage")
class StageTwice:
    @workflow.run
    async def run(self, request: StagesRequest) -> list[StagesReport]:
        reports = []
        for _ in range(2):  # a second run stands in for Temporal re-running the activity
            report: StagesReport = await workflow.execute_activity(
                NAMES.RUN_STAGES,
                request,
                result_type=StagesReport,
                start_to_close_timeout=timedelta(seconds=60),
                heartbeat_timeout=timedelta(seconds=6),
                retry_policy=QUICK,
            )
            reports.append(report)
        return reports


@pytest.fixture(scope="module")
async def client(temporal_server: LocalTemporal) -> Client:
    return await Client.connect(
        temporal_server.address, namespace=temporal_server.namespace, data_converter=pydantic_data_converter
    )


async def test_activities_run_on_a_real_worker(cluster: ClusterUnderTest, client: Client) -> None:
    node, quiet, stage_node = cluster.add_nodes(3)
    namespace = f"aw-{uuid.uuid4().hex[:8]}"
    queue = f"activities-{uuid.uuid4().hex[:8]}"
    api = kube_client.from_kubeconfig(cluster.kubeconfig)
    workflows = [Smoke, RebootTimeout, StageTwice]
    # These throwaway workflows only drive the activities; the sandbox matters for the real ones.
    runner = UnsandboxedWorkflowRunner()
    async with Worker(
        client, task_queue=queue, workflows=workflows, activities=all_activities(api), workflow_runner=runner
    ):
        cordon, uncordoned = await client.execute_workflow(
            Smoke.run, NodeTarget(profile="act-worker", node=node), id=f"smoke-{queue}", task_queue=queue
        )
        assert CordonReport.model_validate(cordon) == CordonReport(ours=True, foreign=False)
        assert uncordoned is True

        package = Package.model_validate(
            {
                "name": "tuning",
                "version": "1.0.0",
                "image": "registry.example/tuning",
                "stageTimeoutSeconds": 60,
            }
        )
        # The package namespaces exist, as the chart creates them (the worker creates none).
        for created in (namespace, f"{namespace}-reboot"):
            cluster.kubectl("create", "namespace", created)
        # An interrupt Job on a node that never reboots (no simulated kubelet here).
        stuck = StageRequest(
            profile="act-worker",
            node=quiet,
            profile_uid="u",
            generation=1,
            package=package,
            stage=Stage.INTERRUPT,
            interrupt=REBOOT,
            agent_image="registry.example/agent:1",
            namespace=f"{namespace}-reboot",
            pod_annotations=stage_pod_timing(0.3),
            reboot_timeout_seconds=1,
        )
        try:
            with pytest.raises(WorkflowFailureError) as failure:
                await client.execute_workflow(
                    RebootTimeout.run,
                    StagesRequest(profile=stuck.profile, node=stuck.node, stages=(stuck,)),
                    id=f"reboot-{queue}",
                    task_queue=queue,
                )
        finally:
            cluster.kubectl("delete", "namespace", stuck.namespace, "--wait=false", check=False)
        activity_error = failure.value.cause
        assert isinstance(activity_error, ActivityError)
        assert isinstance(activity_error.cause, ApplicationError)
        assert activity_error.cause.type == "RebootTimeout"
        assert activity_error.retry_state is not None
        assert activity_error.retry_state.name == "NON_RETRYABLE_FAILURE"

        request = StageRequest(
            profile="act-worker",
            node=stage_node,
            profile_uid="u",
            generation=1,
            package=package,
            stage=Stage.APPLY,
            agent_image="registry.example/agent:1",
            namespace=namespace,
            pod_annotations=stage_pod_timing(0.3),
        )
        try:
            stages = StagesRequest(profile=request.profile, node=request.node, stages=(request,))
            runs = await client.execute_workflow(
                StageTwice.run, stages, id=f"stage-{queue}", task_queue=queue
            )
            reports = [report for run in runs for report in run.reports]
            assert [r.outcome.value for r in reports] == ["Succeeded", "Succeeded"]
            jobs = json.loads(cluster.kubectl("get", "jobs", "-n", namespace, "-o", "json").stdout)["items"]
            assert [j["metadata"]["name"] for j in jobs] == [reports[0].job]
        finally:
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
