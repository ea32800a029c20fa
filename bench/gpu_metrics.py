"""How fast the local stack's Prometheus is usable: Debian's ``prometheus`` started on loopback
with the GPU exporter as its one target (``fleetwright.local.gpumetrics``), measured per start:
until it answers ``/-/ready``, until its first successful scrape of the exporter (Prometheus hands
new targets to its scrape loops on a 5 s tick), and RSS once scraping; then, on one running pair,
how long after ``exporter.set`` an instant query returns the new value (p50 / p99; one scrape a
second bounds it, at a random phase of the scrape).

    .venv/bin/python bench/gpu_metrics.py --starts 5 --changes 40
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from fleetwright.local.gpuexporter import XID_ERRORS
from fleetwright.local.gpumetrics import GpuMetrics

if not __package__:  # run as a file (python bench/gpu_metrics.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import loadavg, peak_rss_mib, percentile

NODE = "gpu-node-0000"


def one_start() -> tuple[float, float, float, str]:
    """(seconds to ready, seconds to the first scrape, RSS MiB, version) of one fresh start."""
    metrics = GpuMetrics(wait_first_scrape=False)
    started = time.monotonic()
    try:
        metrics.start()
        ready = time.monotonic() - started
        metrics.wait_scraping()
        scraped = time.monotonic() - started
        pid = metrics.prometheus.process.pid
        assert pid is not None
        return ready, scraped, peak_rss_mib(pid), metrics.prometheus.version()
    finally:
        metrics.stop()


def set_to_query(metrics: GpuMetrics, changes: int) -> list[float]:
    """Seconds from ``exporter.set`` to an instant query giving the new value, per change, each
    set at a random phase of the scrape interval (right after a query saw the last one, a set
    would come just after a scrape every time)."""
    draw = random.Random(1)
    seconds = []
    for value in range(1, changes + 1):
        time.sleep(draw.uniform(0, 1))
        query = f'{XID_ERRORS}{{Hostname="{NODE}", gpu="0"}} == {value}'
        started = time.monotonic()
        metrics.exporter.set(NODE, XID_ERRORS, value)
        while not metrics.prometheus.query(query):
            time.sleep(0.01)
        seconds.append(time.monotonic() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--changes", type=int, default=40)
    args = parser.parse_args()
    starts = [one_start() for _ in range(args.starts)]
    with GpuMetrics() as metrics:
        latencies = set_to_query(metrics, args.changes)
    version = starts[0][3]
    print(f"Prometheus {version} (Debian), scrape interval 1 s; load {loadavg()}")
    print(f"  ready (/-/ready), median of {args.starts}:  {statistics.median(s[0] for s in starts):.2f} s")
    print(f"  first scrape of the exporter, median:    {statistics.median(s[1] for s in starts):.2f} s")
    print(f"  RSS once scraping, median:               {statistics.median(s[2] for s in starts):.0f} MiB")
    print(
        f"  set -> queryable, {args.changes} changes:        p50 {percentile(latencies, 50):.2f} s, "
        f"p99 {percentile(latencies, 99):.2f} s"
    )
    print(f"reproduce: .venv/bin/python bench/gpu_metrics.py --starts {args.starts} --changes {args.changes}")


if __name__ == "__main__":
    main()
