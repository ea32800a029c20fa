"""A stage with the worker's shared Job watch reads and waits on the watch, not the API, once the
watch has listed (a Job it has not seen yet stands as its create returned it), and ends when the
watch sees its Job's pod succeed; before the watch has listed, it reads and watches the API
itself. A quiet stage looks for a pod stuck pulling on the watch too."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from fleetwright.activities import stage
from fleetwright.activities.stage import StageRunner
from fleetwright.kube import jobs, nodestatus, pods
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import JobFacts, job_facts
from fleetwright.kube.jobwatch import JobWatch
from fleetwright.kube.listwatch import WatchEvent
from fleetwright.stagejob.outcome import StageOutcome, StageReport
from tests.unit.test_jobwatch import pulling_pod, stage_pod
from tests.unit.test_stage_node_gone import request

pytestmark = pytest.mark.unit

NAME = "fw-tuning-apply-x"
UID = "0c5e"


@dataclass(frozen=True)
class PodEvent:
    """A change the pod watch sees (the rest of ``later`` are the Job watch's)."""

    event: WatchEvent


def job(version: str, **status: Any) -> dict[str, Any]:
    meta = {"name": NAME, "namespace": "fleetwright-system", "resourceVersion": version, "uid": UID}
    return {"metadata": meta, "spec": {}, "status": status}


COMPLETE = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}


@pytest.fixture
def api_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The API reads and watches the runner makes (each answered with the Job complete)."""
    calls: list[str] = []
    monkeypatch.setattr(jobs, "create_or_adopt", lambda api, manifest: (job_facts(job("1", active=1)), True))

    def read_job(api: Any, namespace: str, name: str) -> tuple[JobFacts, str]:
        calls.append("read")
        return job_facts(job("2", **COMPLETE)), "100"

    def wait_for_job(api: Any, namespace: str, name: str, version: str, seconds: float) -> bool:
        calls.append("watch")
        return True

    monkeypatch.setattr(jobs, "read_job", read_job)
    monkeypatch.setattr(jobs, "wait_for_job", wait_for_job)
    return calls


def run_stage(listed: WatchEvent | None, later: Sequence[WatchEvent | PodEvent]) -> StageReport:
    """Run a stage with a shared watch that has ``listed`` (None: not yet), then sees ``later``
    changes, each 0.2 s after the last, from the watch's own thread."""

    async def stage() -> StageReport:
        watch = JobWatch(cast(ApiClient, None), "fleetwright-system", asyncio.get_running_loop())
        if listed is not None:
            watch.deliver(listed)

        def deliver_later() -> None:
            for event in later:
                threading.Event().wait(0.2)
                if isinstance(event, PodEvent):
                    watch.deliver_pod(event.event)
                else:
                    watch.deliver(event)

        threading.Thread(target=deliver_later).start()
        with ThreadPoolExecutor(2) as executor:
            return await StageRunner(cast(ApiClient, None), executor, request(), watch).run()

    return asyncio.run(ActivityEnvironment().run(stage))


def test_a_stage_waits_on_the_shared_watch(api_calls: list[str]) -> None:
    listed = WatchEvent("SYNC", items=(job("1", active=1),))
    later = [
        WatchEvent("MODIFIED", obj=job("2", active=1, ready=1)),
        WatchEvent("MODIFIED", obj=job("3", **COMPLETE)),
    ]
    assert run_stage(listed, later).outcome is StageOutcome.SUCCEEDED
    assert api_calls == []  # created, then everything from the watch


def test_a_job_the_watch_has_not_seen_yet_is_not_read_from_the_api(api_calls: list[str]) -> None:
    """Created a moment ago: the create's answer stands until the watch sees the Job change."""
    later = [WatchEvent("ADDED", obj=job("1", active=1)), WatchEvent("MODIFIED", obj=job("2", **COMPLETE))]
    assert run_stage(WatchEvent("SYNC", items=()), later).outcome is StageOutcome.SUCCEEDED
    assert api_calls == []


def test_a_stage_reads_the_api_while_the_watch_has_not_listed(api_calls: list[str]) -> None:
    assert run_stage(None, []).outcome is StageOutcome.SUCCEEDED
    assert api_calls == ["read"]


def test_a_stage_ends_when_its_pod_succeeds_not_a_sync_later_when_the_job_says_so(
    api_calls: list[str],
) -> None:
    listed = WatchEvent("SYNC", items=(job("1", active=1),))
    pod = stage_pod(NAME, UID, "Succeeded", "2026-11-30T04:00:10Z")
    later: list[WatchEvent | PodEvent] = [
        PodEvent(
            WatchEvent("MODIFIED", obj=stage_pod(NAME, "an-earlier-job", "Succeeded", "2026-11-30T03:00:00Z"))
        ),
        PodEvent(WatchEvent("MODIFIED", obj=pod)),
    ]  # the Job itself is never marked Complete here
    report = run_stage(listed, later)
    assert report.outcome is StageOutcome.SUCCEEDED
    assert report.finished_at == datetime(2026, 11, 30, 4, 0, 10, tzinfo=UTC)  # the pod's, not the Job's
    assert api_calls == []


def test_a_quiet_stage_finds_its_pod_stuck_pulling_on_the_watch_not_by_listing_pods(
    api_calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A label-selected pod list scans every kept stage pod of the namespace; the watch has them."""

    def no_list(*args: Any) -> None:
        raise AssertionError("listed the Job's pods")

    settled: list[StageReport] = []

    async def settle(self: StageRunner, job: JobFacts, report: StageReport) -> None:
        settled.append(report)

    async def show(self: StageRunner, wait: str | None, bound: Any) -> None:
        api_calls.append(f"show {wait}")

    monkeypatch.setattr(pods, "job_pods", no_list)
    monkeypatch.setattr(nodestatus, "read_node", lambda api, name: None)
    monkeypatch.setattr(stage, "heartbeat_window", lambda: 0.3)
    monkeypatch.setattr(StageRunner, "_settle", settle)
    monkeypatch.setattr(StageRunner, "_show_pull_wait", show)
    monkeypatch.setattr(jobs, "create_or_adopt", lambda api, manifest: (job_facts(job("1", active=1)), True))
    pulling = pulling_pod(NAME, UID)  # created long before the request's bound of 300 s

    async def quiet_stage() -> StageReport:
        watch = JobWatch(cast(ApiClient, None), "fleetwright-system", asyncio.get_running_loop())
        watch.deliver(WatchEvent("SYNC", items=(job("1", active=1),)))
        watch.deliver_pod(WatchEvent("SYNC", items=(pulling,)))
        with ThreadPoolExecutor(2) as executor:
            return await StageRunner(cast(ApiClient, None), executor, request(), watch).run()

    report = asyncio.run(ActivityEnvironment().run(quiet_stage))
    assert report.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert "cannot pull ghcr.io/example/tuning:1" in report.message
    assert settled == [report]
    assert [call for call in api_calls if not call.startswith("show")] == []
