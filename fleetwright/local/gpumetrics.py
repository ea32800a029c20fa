"""The GPU metrics of the local fleet: the GPU exporter (dcgm-exporter-shaped series that a test or
a user drives) and a Prometheus that scrapes it every second, started and stopped together.

Owns that pairing only: the local stack runs one for ``cluster up`` and the demo, the integration
tier one per session; the metric checks of a health-gated rollout query ``prometheus.url``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fleetwright.local.gpuexporter import GpuExporter
from fleetwright.local.launcher import Launcher
from fleetwright.local.processes import wait_until
from fleetwright.local.prometheus import LocalPrometheus, ScrapeJob

# Prometheus hands new targets to its scrape loops on a 5 s tick, so the first scrape comes about
# 5 s after it started.
FIRST_SCRAPE_TIMEOUT = 60.0
# The job label of the exporter's series, as a Prometheus scraping dcgm-exporter's Service
# usually names it.
EXPORTER_JOB = "dcgm-exporter"


@dataclass
class GpuMetrics(Launcher):
    """The exporter and the Prometheus scraping it. Use as a context manager."""

    workdir: Path | None = None
    wait_first_scrape: bool = True
    """``start`` returns once Prometheus scraped the exporter; off, the caller starts other things
    meanwhile and calls ``wait_scraping`` itself (the local stack)."""
    exporter: GpuExporter = field(init=False, default_factory=GpuExporter)
    prometheus: LocalPrometheus = field(init=False)

    def __post_init__(self) -> None:
        self.workdir = self._work_directory(self.workdir, "fleetwright-gpumetrics-")
        self.prometheus = LocalPrometheus(
            jobs=(ScrapeJob(EXPORTER_JOB, (self.exporter.address,)),), workdir=self.workdir / "prometheus"
        )

    @property
    def url(self) -> str:
        """Prometheus's base URL."""
        return self.prometheus.url

    def _start(self) -> None:
        self.exporter.start()
        self.prometheus.start()
        if self.wait_first_scrape:
            self.wait_scraping()

    def wait_scraping(self, timeout: float = FIRST_SCRAPE_TIMEOUT) -> None:
        """Until Prometheus has scraped the exporter successfully."""

        def scraped() -> bool:
            return any(self.prometheus.targets_up(EXPORTER_JOB).values())

        wait_until(
            scraped,
            timeout=timeout,
            what="Prometheus's first scrape of the GPU exporter",
            alive=self.prometheus.process.check_alive,
            interval=0.1,
        )

    def _stop(self) -> None:
        self.prometheus.stop()
        self.exporter.stop()
