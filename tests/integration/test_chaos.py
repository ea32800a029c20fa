"""The chaos suite in CI: a few seeded iterations (real rollouts on the session's control plane and
Temporal dev server, the worker and controller as processes, faults injected) and zero invariant
violations. The full run is ``fleetwright chaos --seed S --iterations 100``."""

from __future__ import annotations

import pytest

from fleetwright.chaos.iteration import Fault, draw, rollback_plan
from fleetwright.chaos.runner import IterationResult, run
from fleetwright.chaos.system import ChaosStack
from fleetwright.cli.chaos import describe
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.planner.node.state import read_profile_state
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


@pytest.mark.timeout(900)
def test_a_worker_killed_mid_rollback_breaks_no_invariant(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal
) -> None:
    assert isinstance(cluster, LocalCluster)
    plan = rollback_plan(SEED, 0)
    results: list[IterationResult] = []
    with ChaosStack(attached=(cluster, temporal_server)) as stack:
        totals = run(stack, [plan], report=results.append)
    report = "\n".join(describe(r) + "".join(f"\n    {v}" for v in r.violations) for r in results)
    (result,) = results
    assert [i.fault for i in result.injected] == [Fault.KILL_WORKER], report
    assert result.phase == "RolledBack", report
    assert totals.rolled_back == 1, report
    assert totals.violations == 0, report
    final = result.final
    assert final is not None
    for node in final.nodes:
        record = read_profile_state(node.annotations, result.profile).packages["tuning"]
        assert (record.version, record.pending) == ("1.0.0", None), (node.name, record)
        # Back where the 1.0.0 install left it: a before naming that install at most (1.0.0 <- none).
        assert record.before is None or record.before.version is None, (node.name, record)
