"""A stage whose Node was deleted ends with NodeGone once a wait window passes with the Job's pod
not running, instead of waiting out the Job's deadline (the pod of a deleted node never runs) and
reporting a stage failure; a node that exists keeps the stage waiting."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.payloads import StageRequest
from fleetwright.activities.stage import StageRunner
from fleetwright.errors import NodeGoneError
from fleetwright.kube import jobs, nodestatus, pods
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts
from fleetwright.planner.node.stages import Stage
from tests.support.stagerequests import stage_request

pytestmark = pytest.mark.unit

PENDING = JobFacts(namespace="fleetwright-system", name="fw-tuning-apply-x", active=1, ready=0)


class Stopped(Exception):
    """The runner went on to wait for the Job: it did not end the stage."""


def request() -> StageRequest:
    return stage_request(Stage.APPLY, profile="gpu", node="node-1")


@pytest.fixture
def pending_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "create_or_adopt", lambda api, manifest: (PENDING, False))
    monkeypatch.setattr(jobs, "read_job", lambda api, namespace, name: (PENDING, "1"))
    monkeypatch.setattr(pods, "job_pods", lambda api, namespace, name: [])
    # Every window passes quietly: a pending pod on a deleted node changes nothing on the Job.
    monkeypatch.setattr(jobs, "wait_for_job", lambda api, namespace, name, version, seconds: False)


def run(monkeypatch: pytest.MonkeyPatch, read_node: Any) -> None:
    monkeypatch.setattr(nodestatus, "read_node", read_node)
    monkeypatch.setattr(StageRunner, "_show_pull_wait", lambda self, wait, bound: _noop())
    env = ActivityEnvironment()

    beats: list[Any] = []

    def heartbeat(*details: Any) -> None:
        beats.append(details)
        if len(beats) > 1:  # a second window: the runner went on waiting after a quiet one
            raise Stopped

    env.on_heartbeat = heartbeat
    with ThreadPoolExecutor(2) as executor:
        asyncio.run(env.run(StageRunner(cast(ApiClient, None), executor, request()).run))


async def _noop() -> None:
    return None


@pytest.mark.usefixtures("pending_job")
def test_a_stage_on_a_deleted_node_ends_with_node_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(api: Any, name: str) -> Any:
        raise NodeGoneError(f"node {name} does not exist")

    with pytest.raises(NodeGoneError, match="node-1"):
        run(monkeypatch, gone)


@pytest.mark.usefixtures("pending_job")
def test_a_stage_on_a_node_that_exists_keeps_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Stopped):
        run(monkeypatch, lambda api, name: (None, "1"))
