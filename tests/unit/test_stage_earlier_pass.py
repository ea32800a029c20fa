"""Each pass over a node names its own stage Jobs; a stage never starts a second executor on the
host while an earlier pass's Job of the same stage still runs there (its workflow was terminated,
or the node was reset with --force): it is a retryable wait until that Job finishes. The Jobs come
from the API, or from the worker's shared Job watch once it has listed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities.payloads import StageRequest
from fleetwright.activities.stage import StageRunner
from fleetwright.errors import RetryableError
from fleetwright.kube import jobs
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts, job_facts
from fleetwright.kube.jobwatch import JobWatch
from fleetwright.kube.listwatch import WatchEvent
from fleetwright.planner.node.stages import Stage
from fleetwright.stagejob.outcome import StageReport
from fleetwright.stagejob.request import manifest
from tests.support.stagerequests import stage_request

pytestmark = pytest.mark.unit

NS = "fleetwright-system"


def request() -> StageRequest:
    return stage_request(Stage.APPLY, profile="gpu", node="node-1", pass_id="run-2")


def earlier(name: str, *, finished: str | None, active: int, package: str = "tuning") -> dict[str, Any]:
    """A stage Job as the API sends it."""
    labels = {
        "fleetwright.io/profile": "gpu",
        "fleetwright.io/node": "node-1",
        "fleetwright.io/package": package,
        "fleetwright.io/stage": "apply",
    }
    conditions = [{"type": finished, "status": "True"}] if finished else []
    return {
        "metadata": {
            "name": name,
            "namespace": "fleetwright-system",
            "labels": labels,
            "resourceVersion": "1",
        },
        "status": {"active": active, "conditions": conditions},
    }


def selected(listed: list[dict[str, Any]], labels: Mapping[str, str]) -> list[JobFacts]:
    """What a label-selected list returns."""
    facts = [job_facts(item) for item in listed]
    return [job for job in facts if labels.items() <= job.labels.items()]


def run(
    monkeypatch: pytest.MonkeyPatch, listed: list[dict[str, Any]], source: str
) -> tuple[StageReport, list[str]]:
    created: list[str] = []
    done = JobFacts(namespace=NS, name="", finished="Complete")

    watches: list[JobWatch] = []

    def create(api: Any, rendered: dict[str, Any]) -> tuple[JobFacts, bool]:
        name = rendered["metadata"]["name"]
        created.append(name)
        for watch in watches:  # the watch sees the stage's own Job finish
            watch.deliver(WatchEvent("MODIFIED", obj=earlier(name, finished="Complete", active=0)))
        return JobFacts(namespace=NS, name=name), True

    def labelled_jobs(api: Any, namespace: str, labels: Mapping[str, str]) -> list[JobFacts]:
        assert source == "api", "the watch had listed: no API list"
        return selected(listed, labels)

    monkeypatch.setattr(jobs, "labelled_jobs", labelled_jobs)
    monkeypatch.setattr(jobs, "create_or_adopt", create)
    monkeypatch.setattr(jobs, "read_job", lambda api, namespace, name: (done, "1"))
    monkeypatch.setattr(StageRunner, "_show_pull_wait", lambda self, wait, bound: _noop())

    async def stage() -> StageReport:
        watch = None
        if source == "watch":
            watch = JobWatch(cast(ApiClient, None), NS, asyncio.get_running_loop())
            watch.deliver(WatchEvent("SYNC", items=tuple(listed)))
            watches.append(watch)
        with ThreadPoolExecutor(2) as executor:
            return await StageRunner(cast(ApiClient, None), executor, request(), watch).run()

    report = asyncio.run(ActivityEnvironment().run(stage))
    return report, created


async def _noop() -> None:
    return None


SOURCES = pytest.mark.parametrize("source", ["api", "watch"])


@SOURCES
def test_an_earlier_pass_job_still_running_on_the_node_holds_the_stage(
    monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    with pytest.raises(RetryableError, match="fw-old-apply") as held:
        run(monkeypatch, [earlier("fw-old-apply", finished=None, active=1)], source)
    assert held.value.reason == "EarlierPassRunning"


@SOURCES
def test_finished_jobs_of_earlier_passes_and_other_packages_do_not_hold_it(
    monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    listed = [
        earlier("fw-old-apply", finished="Complete", active=0),
        earlier("fw-other-apply", finished=None, active=1, package="driver"),
        earlier(manifest(request())["metadata"]["name"], finished=None, active=1),  # its own: adopted
    ]
    report, created = run(monkeypatch, listed, source)
    assert report.succeeded
    assert created == [manifest(request())["metadata"]["name"]]
