"""Running one validation container of a node gate on its node: creating or adopting the Job
``stagejob.validation`` renders, waiting on the stage runner's machinery (``JobRunner``) for its
outcome, and reading the container's exit code and last output lines for the verdict.

A retried activity adopts the Job its earlier attempt created (deterministic name, 409 = adopt),
so a worker killed mid-validation never starts a second Job. It must not decide what a failed
validation means (the node gate does).
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

from fleetwright.activities.payloads import ValidationRequest
from fleetwright.activities.stage import JobRunner
from fleetwright.activities.waiting import blocking
from fleetwright.errors import FleetwrightError
from fleetwright.kube import pods, stagelogs
from fleetwright.kube.client import ApiClient
from fleetwright.kube.jobwatch import JobWatch
from fleetwright.stagejob.outcome import StageReport
from fleetwright.stagejob.validation import ValidationReport, manifest, tail_of, verdict


class ValidationRunner(JobRunner):
    """Runs one ValidationRequest to its verdict."""

    def __init__(
        self, api: ApiClient, executor: Executor, request: ValidationRequest, watch: JobWatch | None = None
    ) -> None:
        super().__init__(api, executor, request, request.image_pull_timeout_seconds, watch)
        self.request = request

    def manifest(self) -> dict[str, Any]:
        return manifest(self.request)

    async def verdict(self) -> ValidationReport:
        report = await self.run()
        if report.succeeded:
            return verdict(self.request, report, 0, ())
        return verdict(self.request, report, await self._exit_code(report), await self._tail(report))

    async def _exit_code(self, report: StageReport) -> int | None:
        listed = await blocking(self.executor, pods.job_pods, self.api, self.request.namespace, report.job)
        codes = [
            f.exit_code for p in listed for f in p.failures if f.container == self.request.validation.name
        ]
        return codes[-1] if codes else None

    async def _tail(self, report: StageReport) -> tuple[str, ...]:
        """The container's last output lines, through the apiserver's pods/log (none when it never
        started or its pod is gone)."""
        namespace, container = self.request.namespace, self.request.validation.name
        try:
            listed = await blocking(self.executor, stagelogs.job_pods, self.api, namespace, report.job)
            if not listed or container in listed[-1].never_started:
                return ()
            log = await blocking(
                self.executor, stagelogs.container_log, self.api, namespace, listed[-1].name, container
            )
        except FleetwrightError as error:
            return (f"(its output could not be read: {error})",)
        return tail_of(log)
