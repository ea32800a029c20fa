"""A stage Job's end read as the stage's report: success (the Job's, or its pod's before the Job
is marked), failure with the pods' words, the deadline, and an image that never pulls."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from fleetwright.kube.jobs import JobFacts
from fleetwright.kube.jobwatch import PodSucceeded
from fleetwright.kube.pods import ContainerFailure, ContainerWait, PodFacts
from fleetwright.stagejob.outcome import StageOutcome, outcome

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
BOUND = timedelta(minutes=5)


def test_job_outcomes() -> None:
    complete = JobFacts("ns", "job", finished="Complete", started=NOW, finished_at=NOW)
    assert outcome(complete, [], NOW, BOUND).outcome is StageOutcome.SUCCEEDED  # type: ignore[union-attr]
    deadline = JobFacts("ns", "job", finished="Failed", reason="DeadlineExceeded", message="too slow")
    assert outcome(deadline, [], NOW, BOUND).outcome is StageOutcome.DEADLINE_EXCEEDED  # type: ignore[union-attr]
    failed = JobFacts("ns", "job", finished="Failed", reason="BackoffLimitExceeded", message="limit")
    crashed = PodFacts(
        "ns", "job-x", "u", "Failed", failures=(ContainerFailure("tuning-configcheck", 1, "Error", ""),)
    )
    report = outcome(failed, [crashed], NOW, BOUND)
    assert report is not None
    assert report.outcome is StageOutcome.FAILED
    assert (
        report.message
        == "BackoffLimitExceeded: limit; pod job-x: container tuning-configcheck exited 1 (Error: )"
    )
    assert outcome(JobFacts("ns", "job", active=1, ready=1), [], NOW, BOUND) is None


def test_a_jobs_pod_that_succeeded_is_the_stages_success_before_the_job_is_marked() -> None:
    running = JobFacts("ns", "job", active=1, uid="u1")
    report = outcome(running, [], NOW, BOUND, PodSucceeded(job="job", job_uid="u1", at=NOW))
    assert report is not None
    assert (report.outcome, report.finished_at) == (StageOutcome.SUCCEEDED, NOW)
    earlier = PodSucceeded(job="job", job_uid="u0", at=NOW)  # a Job of the same name, deleted since
    assert outcome(running, [], NOW, BOUND, earlier) is None
    failed = JobFacts("ns", "job", finished="Failed", reason="DeadlineExceeded", message="m", uid="u1")
    late = outcome(failed, [], NOW, BOUND, PodSucceeded(job="job", job_uid="u1", at=NOW))
    assert late is not None
    assert late.outcome is StageOutcome.DEADLINE_EXCEEDED  # the Job's own verdict stands


def test_an_image_pull_is_given_its_bound_then_fails_the_stage() -> None:
    running = JobFacts("ns", "job", active=1)
    wait = ContainerWait("tuning-init", "ImagePullBackOff", "Back-off pulling image", "ghcr.io/x:1")
    young = PodFacts("ns", "job-x", "u", created=NOW - BOUND + timedelta(seconds=1), waits=(wait,))
    assert outcome(running, [young], NOW, BOUND) is None
    old = dataclasses.replace(young, created=NOW - BOUND)
    report = outcome(running, [old], NOW, BOUND)
    assert report is not None
    assert report.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert "ghcr.io/x:1" in report.message
    assert "ImagePullBackOff" in report.message
    # Any other wait (a slow init, a crash loop) is not a pull failure.
    busy = dataclasses.replace(old, waits=(ContainerWait("tuning-init", "PodInitializing", ""),))
    assert outcome(running, [busy], NOW, BOUND) is None


def test_an_adopted_job_carrying_a_pull_verdict_reports_it_again() -> None:
    noted = JobFacts(
        "ns",
        "job",
        suspended=True,
        annotations={"fleetwright.io/outcome": "ImagePullFailed", "fleetwright.io/outcome-message": "m"},
    )
    report = outcome(noted, [], NOW, BOUND)
    assert report is not None
    assert (report.outcome, report.message) == (StageOutcome.IMAGE_PULL_FAILED, "m")
