"""The chaos suite in CI: a few seeded iterations (real rollouts on the session's control plane and
Temporal dev server, the worker and controller as processes, faults injected) and zero invariant
violations. The full run is ``fleetwright chaos --seed S --iterations 100``."""

from __future__ import annotations

import pytest

from fleetwright.chaos.plan import draw
from fleetwright.chaos.runner import IterationResult, run
from fleetwright.chaos.stack import ChaosStack
from fleetwright.cli.chaos import describe
from fleetwright.localcluster.cluster import LocalCluster
from fleetwright.localcluster.temporal import LocalTemporal
from tests.support.providers import ClusterUnderTest

pytestmark = pytest.mark.integration

SEED = 20261129
ITERATIONS = 2
# The minute of Temporal being unreachable, scaled down to keep CI within its budget.
OUTAGE_SECONDS = 15.0


@pytest.mark.timeout(900)
def test_seeded_chaos_iterations_break_no_invariant(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal
) -> None:
    assert isinstance(cluster, LocalCluster), (
        "the chaos suite kills kube-apiserver: it needs the local provider"
    )
    plans = [draw(SEED, i, outage_seconds=OUTAGE_SECONDS) for i in range(ITERATIONS)]
    results: list[IterationResult] = []
    with ChaosStack(attached=(cluster, temporal_server)) as stack:
        totals = run(stack, plans, report=results.append)
    report = "\n".join(describe(r) + "".join(f"\n    {v}" for v in r.violations) for r in results)
    assert totals.iterations == ITERATIONS
    assert sum(totals.faults.values()) >= ITERATIONS, report
    assert all(r.snapshots > 10 for r in results), report  # the watcher really watched
    assert totals.completed + totals.halted == ITERATIONS, report
    assert totals.violations == 0, report
