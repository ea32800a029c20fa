"""Each pass over a node names its own stage Jobs; a stage never starts a second executor on the
host while an earlier pass's Job of the same stage still runs there (its workflow was terminated,
or the node was reset with --force): it is a retryable wait until that Job finishes."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.payloads import StageReport, StageRequest
from fleetwright.activities.stage import StageRunner, manifest
from fleetwright.api.nodeprofile import Package
from fleetwright.errors import RetryableError
from fleetwright.kube import jobs, stagelogs
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts
from fleetwright.kube.stagelogs import StageJob
from fleetwright.planner.stages import Stage

pytestmark = pytest.mark.unit


def request() -> StageRequest:
    package = Package.model_validate(
        {"name": "tuning", "version": "1.0.0", "image": "ghcr.io/example/tuning"}
    )
    return StageRequest(
        profile="gpu",
        node="node-1",
        profile_uid="uid",
        generation=1,
        package=package,
        stage=Stage.APPLY,
        agent_image="ghcr.io/example/agent:1",
        pass_id="run-2",
    )


def earlier(name: str, *, finished: str | None, active: int, package: str = "tuning") -> StageJob:
    return StageJob(
        namespace="fleetwright-system",
        name=name,
        profile="gpu",
        node="node-1",
        package=package,
        stage="apply",
        created=None,
        finished=finished,
        active=active,
    )


def run(monkeypatch: pytest.MonkeyPatch, listed: list[StageJob]) -> tuple[StageReport, list[str]]:
    created: list[str] = []
    done = JobFacts(namespace="fleetwright-system", name="", finished="Complete")

    def create(api: Any, rendered: dict[str, Any]) -> tuple[JobFacts, bool]:
        created.append(rendered["metadata"]["name"])
        return JobFacts(namespace="fleetwright-system", name=rendered["metadata"]["name"]), True

    monkeypatch.setattr(jobs, "ensure_namespace", lambda api, name: None)
    monkeypatch.setattr(stagelogs, "stage_jobs", lambda api, namespace, profile, node, stage: listed)
    monkeypatch.setattr(jobs, "create_or_adopt", create)
    monkeypatch.setattr(jobs, "read_job", lambda api, namespace, name: (done, "1"))
    monkeypatch.setattr(StageRunner, "_show_pull_wait", lambda self, wait, bound: _noop())
    with ThreadPoolExecutor(2) as executor:
        runner = StageRunner(cast(ApiClient, None), executor, request())
        report = asyncio.run(ActivityEnvironment().run(runner.run))
    return report, created


async def _noop() -> None:
    return None


def test_an_earlier_pass_job_still_running_on_the_node_holds_the_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(RetryableError, match="fw-old-apply") as held:
        run(monkeypatch, [earlier("fw-old-apply", finished=None, active=1)])
    assert held.value.reason == "EarlierPassRunning"


def test_finished_jobs_of_earlier_passes_and_other_packages_do_not_hold_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = [
        earlier("fw-old-apply", finished="Complete", active=0),
        earlier("fw-other-apply", finished=None, active=1, package="driver"),
        earlier(manifest(request())["metadata"]["name"], finished=None, active=1),  # its own: adopted
    ]
    report, created = run(monkeypatch, listed)
    assert report.succeeded
    assert created == [manifest(request())["metadata"]["name"]]
