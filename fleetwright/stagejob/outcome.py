"""What a stage Job's end means for the stage: the report (``StageReport``) read from the Job's
and its pods' facts. A stage failure is a report, not an exception; so is an image that never
pulls, after its bound (NodeWright #306). Pure: the run-stages activity reads the facts and passes
the clock in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from fleetwright.api.keys import OUTCOME_ANNOTATION, OUTCOME_MESSAGE_ANNOTATION
from fleetwright.kube.jobs import JobFacts
from fleetwright.kube.jobwatch import PodSucceeded
from fleetwright.kube.pods import PodFacts
from fleetwright.planner.base import Frozen

IMAGE_PULL_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull"})


class StageOutcome(StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    IMAGE_PULL_FAILED = "ImagePullFailed"
    DEADLINE_EXCEEDED = "DeadlineExceeded"


class StageReport(Frozen):
    job: str
    outcome: StageOutcome
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome is StageOutcome.SUCCEEDED


def outcome(
    job: JobFacts,
    pods_of_job: Sequence[PodFacts],
    now: datetime,
    pull_bound: timedelta,
    pod_success: PodSucceeded | None = None,
) -> StageReport | None:
    """The stage's report once the Job has an outcome, else None. The Job's pod exiting 0 is its
    success, before the Job controller's next sync marks the Job Complete."""
    base: dict[str, Any] = {"job": job.name, "started_at": job.started}
    if job.annotations.get(OUTCOME_ANNOTATION) == StageOutcome.IMAGE_PULL_FAILED.value:
        message = job.annotations.get(OUTCOME_MESSAGE_ANNOTATION, "image pull failed")
        return StageReport(**base, outcome=StageOutcome.IMAGE_PULL_FAILED, message=message)
    if job.finished == "Complete":
        return StageReport(**base, outcome=StageOutcome.SUCCEEDED, finished_at=job.finished_at)
    if job.finished is None and pod_success is not None and pod_success.job_uid == job.uid:
        return StageReport(**base, outcome=StageOutcome.SUCCEEDED, finished_at=pod_success.at)
    if job.finished == "Failed":
        kind = StageOutcome.DEADLINE_EXCEEDED if job.reason == "DeadlineExceeded" else StageOutcome.FAILED
        message = "; ".join(m for m in (f"{job.reason}: {job.message}", _failure_details(pods_of_job)) if m)
        return StageReport(**base, outcome=kind, message=message, finished_at=job.finished_at)
    pull = _pull_failure(pods_of_job, now, pull_bound)
    if pull is not None:
        return StageReport(**base, outcome=StageOutcome.IMAGE_PULL_FAILED, message=pull, finished_at=now)
    return None


def verdict_notes(report: StageReport) -> dict[str, str]:
    """The annotations that keep an image-pull verdict on its Job (``outcome`` reads them back)."""
    return {OUTCOME_ANNOTATION: report.outcome.value, OUTCOME_MESSAGE_ANNOTATION: report.message[:1000]}


def has_verdict(job: JobFacts) -> bool:
    return OUTCOME_ANNOTATION in job.annotations


def _pull_failure(pods_of_job: Sequence[PodFacts], now: datetime, bound: timedelta) -> str | None:
    """A message when a pod of the Job has failed to pull an image for longer than ``bound``."""
    for pod in pods_of_job:
        stuck = [w for w in pod.waits if w.reason in IMAGE_PULL_REASONS]
        if stuck and pod.created is not None and now - pod.created >= bound:
            wait = stuck[0]
            return (
                f"pod {pod.name}: container {wait.container} cannot pull {wait.image or 'its image'} "
                f"for {int((now - pod.created).total_seconds())}s ({wait.reason}: {wait.message})"
            )
    return None


def _failure_details(pods_of_job: Sequence[PodFacts]) -> str:
    details = [
        f"pod {pod.name}: container {f.container} exited {f.exit_code}"
        + (f" ({f.reason}: {f.message})" if f.reason or f.message else "")
        for pod in pods_of_job
        for f in pod.failures
    ]
    return "; ".join(details[-3:])  # the latest attempts say most


def pull_wait(pods_of_job: Sequence[PodFacts]) -> str | None:
    """What a pod of the Job waits for when it cannot pull an image, else None."""
    for pod in pods_of_job:
        for wait in pod.waits:
            if wait.reason in IMAGE_PULL_REASONS:
                image = wait.image or "its image"
                return f"pod {pod.name}: container {wait.container} cannot pull {image} ({wait.reason})"
    return None


def waits(pods_of_job: Sequence[PodFacts]) -> list[str]:
    """Every container wait of the Job's pods, for the activity's heartbeat details."""
    return [f"{p.name}/{w.container}: {w.reason}" for p in pods_of_job for w in p.waits]
