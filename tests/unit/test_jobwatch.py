"""The shared stage-Job watch: its cache answers nothing before a list or after a failure; a wait
wakes on its own Job's change (delivered from another thread), on deletion and on its pod's
success, not on another Job's; a lost watch sends every wait back to the API; a quiet window
returns False. The pod watch keeps each Job's unfinished pods for a quiet stage to look at. The
facts come from the API's JSON."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobs import job_facts
from fleetwright.kube.jobwatch import JobWatch, PodSucceeded, pod_succeeded, slim_job, slim_pod
from fleetwright.kube.listwatch import WatchEvent
from fleetwright.kube.pods import ContainerFailure, ContainerWait, json_facts

pytestmark = pytest.mark.unit


def job(name: str, version: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
        "spec": {},
        "status": status,
    }


def watch() -> JobWatch:
    return JobWatch(cast(ApiClient, None), "ns", asyncio.get_running_loop())


def from_thread(target: JobWatch, event: WatchEvent, delay: float = 0.05) -> threading.Thread:
    """Deliver ``event`` the way the watch thread does: from another thread, a little later."""

    def deliver() -> None:
        threading.Event().wait(delay)
        target.deliver(event)

    thread = threading.Thread(target=deliver)
    thread.start()
    return thread


def test_job_facts_read_the_api_json() -> None:
    complete = job(
        "a",
        "7",
        startTime="2026-11-30T04:00:00Z",
        completionTime="2026-11-30T04:00:10Z",
        succeeded=1,
        conditions=[{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-30T04:00:10Z"}],
    )
    facts = job_facts(complete)
    assert (facts.name, facts.namespace, facts.version, facts.finished) == ("a", "ns", "7", "Complete")
    assert facts.started == datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    assert facts.finished_at == datetime(2026, 11, 30, 4, 0, 10, tzinfo=UTC)
    failed = job(
        "b",
        "8",
        active=0,
        conditions=[
            {"type": "FailureTarget", "status": "True"},
            {
                "type": "Failed",
                "status": "True",
                "reason": "DeadlineExceeded",
                "message": "too slow",
                "lastTransitionTime": "2026-11-30T04:01:00Z",
            },
        ],
    )
    facts = job_facts(failed)
    assert (facts.finished, facts.reason, facts.message) == ("Failed", "DeadlineExceeded", "too slow")
    assert facts.finished_at == datetime(2026, 11, 30, 4, 1, tzinfo=UTC)
    suspended = {**failed, "spec": {"suspend": True, "template": {"spec": {"containers": []}}}}
    suspended["metadata"] = {**failed["metadata"], "managedFields": [{"manager": "kube-controller-manager"}]}
    assert job_facts(slim_job(suspended)) == job_facts(suspended)  # the watch keeps what facts read
    assert job_facts(suspended).suspended
    assert "template" not in slim_job(suspended)["spec"]
    assert "managedFields" not in slim_job(suspended)["metadata"]
    running = job_facts(job("c", "9", active=1, ready=1))
    assert (running.finished, running.active, running.ready, running.started) == (None, 1, 1, None)


async def test_the_cache_answers_only_after_a_list() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("ADDED", obj=job("a", "1")))
    assert jobs.get("a") is None
    assert not jobs.synced
    jobs.deliver(WatchEvent("SYNC", items=(job("a", "2", active=1),)))
    seen = jobs.get("a")
    assert seen is not None
    assert seen.version == "2"
    assert seen.active == 1
    assert jobs.get("b") is None


async def test_a_wait_wakes_on_its_own_jobs_change_only() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(job("a", "1"), job("b", "1"))))
    other = from_thread(jobs, WatchEvent("MODIFIED", obj=job("b", "2")))
    assert await jobs.wait("a", "1", 0.3) is False  # b changed, a did not: a quiet window
    other.join()
    mine = from_thread(jobs, WatchEvent("MODIFIED", obj=job("a", "2", ready=1)))
    assert await jobs.wait("a", "1", 5) is True
    mine.join()
    seen = jobs.get("a")
    assert seen is not None
    assert seen.ready == 1


async def test_a_wait_returns_at_once_when_the_job_already_moved() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(job("a", "3"),)))
    assert await jobs.wait("a", "2", 5) is True  # read at 2 from the API; the watch has 3


async def test_a_job_the_watch_has_not_seen_yet_is_waited_for() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=()))
    assert await jobs.wait("new", "5", 0.1) is False
    jobs.deliver(WatchEvent("ADDED", obj=job("new", "5")))  # created at 5: not a change
    assert await jobs.wait("new", "5", 0.1) is False
    later = from_thread(jobs, WatchEvent("MODIFIED", obj=job("new", "6")))
    assert await jobs.wait("new", "5", 5) is True
    later.join()


async def test_a_deleted_job_wakes_its_wait_and_is_gone() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(job("a", "1"),)))
    deleted = from_thread(jobs, WatchEvent("DELETED", obj=job("a", "2")))
    assert await jobs.wait("a", "1", 5) is True
    deleted.join()
    assert jobs.get("a") is None
    assert jobs.gone("a")
    jobs.deliver(WatchEvent("SYNC", items=(job("b", "1"),)))
    assert jobs.gone("a")  # still gone after a relist
    jobs.deliver(WatchEvent("ADDED", obj=job("a", "9")))  # created again
    assert not jobs.gone("a")


async def test_a_relist_drops_what_was_deleted_while_the_watch_was_away() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(job("a", "1"), job("b", "1"))))
    jobs.deliver(WatchEvent("SYNC", items=(job("b", "1"),)))
    assert jobs.get("a") is None
    assert jobs.gone("a")


async def test_a_lost_watch_answers_nothing_and_sends_every_wait_to_the_api() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(job("a", "1"),)))
    waiting = asyncio.create_task(jobs.wait("a", "1", 5))
    await asyncio.sleep(0.05)
    lose = threading.Thread(target=jobs.lost)
    lose.start()
    assert await asyncio.wait_for(waiting, 2) is True  # woken at once: read the Job from the API
    lose.join()
    assert not jobs.synced
    assert jobs.get("a") is None


def labelled_job(name: str, node: str, stage: str) -> dict[str, Any]:
    raw = job(name, "1")
    raw["metadata"]["labels"] = {"fleetwright.io/node": node, "fleetwright.io/stage": stage}
    return raw


async def test_labelled_jobs_are_found_by_node_and_every_label() -> None:
    jobs = watch()
    assert jobs.labelled({"fleetwright.io/node": "n1"}) is None  # not listed yet
    jobs.deliver(
        WatchEvent("SYNC", items=(labelled_job("a", "n1", "apply"), labelled_job("b", "n2", "apply")))
    )
    jobs.deliver(WatchEvent("ADDED", obj=labelled_job("c", "n1", "config")))

    def names(**labels: str) -> list[str]:
        found = jobs.labelled({f"fleetwright.io/{k}": v for k, v in labels.items()})
        assert found is not None
        return sorted(j.name for j in found)

    assert names(node="n1") == ["a", "c"]
    assert names(node="n1", stage="apply") == ["a"]
    assert names(stage="apply") == ["a", "b"]  # without a node: every Job
    assert names(node="n3") == []
    jobs.deliver(WatchEvent("DELETED", obj=labelled_job("a", "n1", "apply")))
    assert names(node="n1") == ["c"]


def stage_pod(job_name: str, job_uid: str, phase: str, finished: str = "") -> dict[str, Any]:
    """A stage pod as the API sends it (what the Job controller and the kubelet put on it)."""
    terminated = {"exitCode": 0, "finishedAt": finished} if finished else None
    return {
        "metadata": {
            "name": f"{job_name}-x7k2p",
            "namespace": "ns",
            "labels": {
                "batch.kubernetes.io/job-name": job_name,
                "app.kubernetes.io/managed-by": "fleetwright",
            },
            "ownerReferences": [{"kind": "Job", "name": job_name, "uid": job_uid, "controller": True}],
            "managedFields": [{"manager": "kube-controller-manager"}],
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "x"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "main", "state": {"terminated": terminated} if terminated else {}}
            ],
        },
    }


def uid_job(name: str, version: str, uid: str) -> dict[str, Any]:
    raw = job(name, version, active=1)
    raw["metadata"]["uid"] = uid
    return raw


def test_a_succeeded_stage_pod_names_its_job_and_when_it_ended() -> None:
    done = stage_pod("a", "uid-a", "Succeeded", "2026-11-30T04:00:10Z")
    success = pod_succeeded(done)
    assert success == PodSucceeded(job="a", job_uid="uid-a", at=datetime(2026, 11, 30, 4, 0, 10, tzinfo=UTC))
    assert pod_succeeded(slim_pod(done)) == success  # the watch keeps what it reads
    assert "spec" not in slim_pod(done)
    assert pod_succeeded(stage_pod("a", "uid-a", "Running")) is None
    assert pod_succeeded(stage_pod("a", "uid-a", "Failed", "2026-11-30T04:00:10Z")) is None
    orphan = stage_pod("a", "uid-a", "Succeeded")
    orphan["metadata"]["ownerReferences"] = []
    assert pod_succeeded(orphan) is None  # not a Job's pod


async def test_a_wait_wakes_when_its_jobs_pod_succeeds_before_the_job_says_so() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(uid_job("a", "1", "uid-a"),)))
    jobs.deliver_pod(WatchEvent("SYNC", items=()))
    facts = jobs.get("a")
    assert facts is not None
    running = from_thread(jobs, WatchEvent("MODIFIED", obj=stage_pod("a", "uid-a", "Running")), delay=0.0)
    assert await jobs.wait("a", "1", 0.3, "uid-a") is False  # a running pod is no news
    running.join()
    done = stage_pod("a", "uid-a", "Succeeded", "2026-11-30T04:00:10Z")
    ended = threading.Thread(target=jobs.deliver_pod, args=(WatchEvent("MODIFIED", obj=done),))
    waiting = asyncio.create_task(jobs.wait("a", "1", 5, "uid-a"))
    await asyncio.sleep(0.05)
    ended.start()
    assert await asyncio.wait_for(waiting, 2) is True
    ended.join()
    assert jobs.succeeded(facts) == pod_succeeded(done)
    assert await jobs.wait("a", "1", 5, "uid-a") is True  # a wait begun after it returns at once


async def test_a_pod_of_an_earlier_job_of_the_same_name_is_not_its_success() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(uid_job("a", "1", "uid-new"),)))
    jobs.deliver_pod(
        WatchEvent("SYNC", items=(stage_pod("a", "uid-old", "Succeeded", "2026-11-30T04:00:10Z"),))
    )
    facts = jobs.get("a")
    assert facts is not None
    assert jobs.succeeded(facts) is None
    assert await jobs.wait("a", "1", 0.1, "uid-new") is False


def pulling_pod(job_name: str, job_uid: str, pod: str = "a-x1") -> dict[str, Any]:
    raw = stage_pod(job_name, job_uid, "Pending")
    raw["metadata"].update(name=pod, uid=f"{pod}-uid", creationTimestamp="2026-11-30T04:00:00Z")
    raw["status"]["initContainerStatuses"] = [
        {
            "name": "copy",
            "image": "ghcr.io/example/tuning:1",
            "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}},
        }
    ]
    return raw


def test_a_slim_pod_keeps_what_a_stage_reads_of_it() -> None:
    raw = pulling_pod("a", "uid-a")
    assert json_facts(slim_pod(raw)) == json_facts(raw)
    facts = json_facts(raw)
    assert facts.waits == (ContainerWait("copy", "ErrImagePull", "not found", "ghcr.io/example/tuning:1"),)
    assert facts.created == datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    failed = stage_pod("a", "uid-a", "Failed", "2026-11-30T04:00:10Z")
    failed["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode=3, reason="Error")
    assert json_facts(slim_pod(failed)).failures == (ContainerFailure("main", 3, "Error", ""),)


async def test_the_unfinished_pods_of_a_job_come_from_the_pod_watch() -> None:
    jobs = watch()
    jobs.deliver(WatchEvent("SYNC", items=(uid_job("a", "1", "uid-a"),)))
    facts = jobs.get("a")
    assert facts is not None
    assert jobs.pods_of(facts) is None  # the pod watch has not listed: ask the API
    jobs.deliver_pod(WatchEvent("SYNC", items=(pulling_pod("a", "uid-old", "a-old"),)))
    assert jobs.pods_of(facts) == []  # an earlier Job of the same name's pod is not this Job's
    jobs.deliver_pod(WatchEvent("ADDED", obj=pulling_pod("a", "uid-a")))
    assert [(p.name, p.waits[0].reason) for p in jobs.pods_of(facts) or []] == [("a-x1", "ErrImagePull")]
    running = pulling_pod("a", "uid-a")
    running["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "main", "state": {"running": {}}}],
    }
    jobs.deliver_pod(WatchEvent("MODIFIED", obj=running))
    assert [p.waits for p in jobs.pods_of(facts) or []] == [()]  # pulled: no wait left
    done = pulling_pod("a", "uid-a")
    done["status"] = stage_pod("a", "uid-a", "Succeeded", "2026-11-30T04:00:10Z")["status"]
    jobs.deliver_pod(WatchEvent("MODIFIED", obj=done))
    assert jobs.pods_of(facts) == []  # finished pods are not kept
    jobs.deliver_pod(WatchEvent("ADDED", obj=pulling_pod("a", "uid-a", "a-x2")))
    jobs.deliver_pod(WatchEvent("DELETED", obj=pulling_pod("a", "uid-a", "a-x2")))
    assert jobs.pods_of(facts) == []
    jobs.pods_lost()
    assert jobs.pods_of(facts) is None  # until it has listed again
