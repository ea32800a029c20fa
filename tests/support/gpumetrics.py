"""The integration tier's GPU metrics: one GPU exporter and one real Prometheus scraping it every
second, started once per session (``gpu_metrics`` in ``tests/conftest.py``; a test takes the
``prometheus`` and ``exporter`` fixtures), and the waits a test needs around a scrape: the series a
test set is queryable, or gone.

A test drives the exporter (``exporter.set(node, metric, value, gpu=0)``, ``exporter.drop(node)``,
``exporter.fail_scrapes()``) on nodes of its own (``unique`` names), so tests sharing the session's
exporter do not see each other's series; scrapes that a test made fail answer again after it.
"""

from __future__ import annotations

from fleetwright.local.prometheus import LocalPrometheus, Sample
from tests.support.waiting import wait_for

# A scrape every second: a value set is queryable within about one; the margin is for a loaded
# machine.
SCRAPE_WAIT = 30.0


def wait_value(
    prometheus: LocalPrometheus, promql: str, value: float, timeout: float = SCRAPE_WAIT
) -> Sample:
    """Until the instant query ``promql`` gives one sample whose value is ``value``."""

    def seen() -> Sample | None:
        samples = prometheus.query(promql)
        return samples[0] if len(samples) == 1 and samples[0].value == value else None

    sample: Sample = wait_for(seen, timeout=timeout, what=f"{promql} = {value} in Prometheus", interval=0.1)
    return sample


def wait_no_data(prometheus: LocalPrometheus, promql: str, timeout: float = SCRAPE_WAIT) -> None:
    """Until the instant query ``promql`` gives no sample (the series went stale)."""
    wait_for(
        lambda: not prometheus.query(promql), timeout=timeout, what=f"no data for {promql}", interval=0.1
    )
