"""fleetwright's metrics: profile gauges from the published progress, activity-level histograms
and counters from the interceptor's recording functions, conventional names, and the bridge that
folds the Temporal SDK's exposition into ours."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from prometheus_client import generate_latest

from fleetwright.activities.payloads import (
    NAMES,
    CordonRequest,
    DecideReport,
    DecideRequest,
    DrainReport,
    NodePhase,
    NodeStatusRequest,
    NodeTarget,
    StagesReport,
    StagesRequest,
    StatusNote,
    UncordonRequest,
)
from fleetwright.api.keys import NodeReason
from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.health.analysis import CheckPhase, Measurement
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.lifecycle import begin
from fleetwright.planner.rollout.observations import Observations
from fleetwright.planner.rollout.state import FleetGateOutcome
from fleetwright.process import metrics
from fleetwright.stagejob.outcome import StageOutcome, StageReport
from fleetwright.worker import interceptor
from fleetwright.workflows.payloads import Progress
from tests.support.stagerequests import stage_request

pytestmark = pytest.mark.unit


def value(name: str, **labels: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(name, labels)


def progress(**fields: object) -> Progress:
    base: dict[str, object] = {"profile": "p", "phase": "Progressing", "message": "", "targeted": 10}
    return Progress.model_validate(base | fields)


def test_nodes_by_state_cover_every_targeted_node() -> None:
    metrics.record_progress("gauges", progress(updated=4, running=2, failed=1, blocked=1, step="canary"))
    states = {s: value("fleetwright_nodes", profile="gauges", state=s) for s in metrics.NODE_STATES}
    assert states == {"updated": 4, "running": 2, "failed": 1, "blocked": 1, "pending": 2}


def test_phase_and_step_follow_the_rollout() -> None:
    metrics.record_progress("phases", progress(phase="Soaking", step="gates: watch"))
    metrics.record_progress("phases", progress(phase="Complete", step="done", max_unavailable=3))
    assert value("fleetwright_rollout_phase", profile="phases", phase="Soaking") == 0
    assert value("fleetwright_rollout_phase", profile="phases", phase="Complete") == 1
    assert value("fleetwright_rollout_step_info", profile="phases", step="gates: watch") is None
    assert value("fleetwright_rollout_step_info", profile="phases", step="done") == 1
    assert value("fleetwright_rollout_max_unavailable_nodes", profile="phases") == 3


def test_blocked_nodes_by_kind_reset_when_unblocked() -> None:
    reasons = {"n1": "Budget: maxUnavailable 2 reached", "n2": "Budget: x", "n3": "OutsideWindow: 5m"}
    metrics.record_progress("blocked", progress(blocked=3, blocked_reasons=reasons))
    assert value("fleetwright_rollout_blocked_nodes", profile="blocked", reason="Budget") == 2
    assert value("fleetwright_rollout_blocked_nodes", profile="blocked", reason="OutsideWindow") == 1
    assert value("fleetwright_rollout_blocked_nodes", profile="blocked", reason="FailedEarlier") == 0
    metrics.record_progress("blocked", progress())
    assert value("fleetwright_rollout_blocked_nodes", profile="blocked", reason="Budget") == 0


def test_waiting_nodes_by_kind_reset_when_they_start() -> None:
    unit = (
        "WaitingForUnit: n3 of its workload cannot start (NotReady: the node is not Ready); at most until t"
    )
    reasons = {"n1": unit, "n2": unit, "n4": "Budget: maxUnavailable 1 reached"}
    metrics.record_progress("waiting", progress(waiting=3, waiting_reasons=reasons))
    assert value("fleetwright_rollout_waiting_nodes", profile="waiting", reason="WaitingForUnit") == 2
    assert value("fleetwright_rollout_waiting_nodes", profile="waiting", reason="Budget") == 1
    assert value("fleetwright_rollout_waiting_nodes", profile="waiting", reason="WaitingForWorkloads") == 0
    metrics.record_progress("waiting", progress())
    assert value("fleetwright_rollout_waiting_nodes", profile="waiting", reason="WaitingForUnit") == 0
    assert value("fleetwright_rollout_waiting_nodes", profile="waiting", reason="Budget") == 0


def test_each_stage_counts_its_job_failure_and_its_duration_comes_from_the_job() -> None:
    stages = tuple(stage_request(s, profile="stages") for s in (Stage.APPLY, Stage.CONFIG))
    request = StagesRequest(profile="stages", node="n", stages=stages)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    passed = StageReport(
        job="a", outcome=StageOutcome.SUCCEEDED, started_at=start, finished_at=start + timedelta(seconds=5)
    )
    failed = StageReport(
        job="c", outcome=StageOutcome.FAILED, started_at=start, finished_at=start + timedelta(seconds=42)
    )
    report = StagesReport(reports=(passed, failed))
    interceptor.record_result(
        NAMES.RUN_STAGES, {"profile": "stages"}, report, 99.0, "succeeded", request=request
    )
    config = {"profile": "stages", "package": "tuning", "stage": "config"}
    assert value("fleetwright_stage_job_failures_total", **config, outcome="Failed") == 1
    assert value("fleetwright_stage_job_failures_total", **config, outcome="ImagePullFailed") == 0
    assert value("fleetwright_stage_duration_seconds_sum", **config, outcome="Failed") == 42
    apply = {"profile": "stages", "package": "tuning", "stage": "apply"}
    assert value("fleetwright_stage_duration_seconds_sum", **apply, outcome="Succeeded") == 5
    activity = {"activity": NAMES.RUN_STAGES, "outcome": "succeeded"}
    assert value("fleetwright_activity_duration_seconds_count", **activity)


def test_a_preflight_check_counts_under_its_own_stage_name() -> None:
    check = stage_request(Stage.APPLY, profile="preflight").model_copy(update={"preflight": True})
    request = StagesRequest(profile="preflight", node="n", stages=(check,))
    report = StagesReport(reports=(StageReport(job="p", outcome=StageOutcome.FAILED),))
    interceptor.record_result(
        NAMES.RUN_STAGES, {"profile": "preflight"}, report, 1.0, "succeeded", request=request
    )
    preflight = {"profile": "preflight", "package": "tuning", "outcome": "Failed"}
    assert value("fleetwright_stage_job_failures_total", **preflight, stage="apply-preflight") == 1
    assert value("fleetwright_stage_job_failures_total", **preflight, stage="apply") is None


def test_held_drains_by_reason_from_heartbeats() -> None:
    beat = {"blocked": ["ml/trainer-0: PodDisruptionBudget (Cannot evict pod as it would violate ...)"]}
    interceptor.drain_heartbeat("drains", "n1", [beat])
    interceptor.drain_heartbeat("drains", "n2", [beat])
    assert value("fleetwright_drains_blocked", profile="drains", reason="PodDisruptionBudget") == 2
    assert value("fleetwright_drains_blocked", profile="drains", reason="DrainTimeout") == 0
    interceptor.drain_heartbeat("drains", "n1", [{"blocked": []}])
    report = DrainReport(blocked_seconds=7.5)
    interceptor.record_result(NAMES.DRAIN, {"profile": "drains", "node": "n2"}, report, 9.0, "succeeded")
    assert value("fleetwright_drains_blocked", profile="drains", reason="PodDisruptionBudget") == 0
    assert value("fleetwright_drain_blocked_seconds_total", profile="drains") == 7.5
    assert value("fleetwright_drain_duration_seconds_count", profile="drains", outcome="succeeded") == 1


def test_node_update_duration_from_first_status_to_the_end() -> None:
    interceptor.record_node_status("node/nodes/n1", "nodes", NodePhase.IN_PROGRESS)
    interceptor.record_node_status("node/nodes/n1", "nodes", NodePhase.IN_PROGRESS)  # a retry: same start
    interceptor.record_node_status("node/nodes/n1", "nodes", NodePhase.COMPLETE)
    interceptor.record_node_status("node/nodes/n2", "nodes", NodePhase.FAILED)  # start not seen: skipped
    assert value("fleetwright_node_update_duration_seconds_count", profile="nodes", outcome="succeeded") == 1
    assert value("fleetwright_node_update_duration_seconds_count", profile="nodes", outcome="failed") is None


def test_names_follow_prometheus_conventions() -> None:
    interceptor.record_result(NAMES.RUN_STAGES, {"profile": "names"}, None, 1.0, "failed")
    interceptor.record_result(NAMES.DRAIN, {"profile": "names"}, DrainReport(), 1.0, "succeeded")
    names = metrics.names_in(generate_latest(metrics.REGISTRY).decode())
    assert all(n.startswith("fleetwright_") for n in names)
    counters = {n for n in names if "failures" in n or "blocked_seconds" in n}
    assert all(n.endswith("_total") for n in counters if not n.endswith("_created")), counters
    histograms = {n.removesuffix("_bucket") for n in names if n.endswith("_bucket")}
    assert len(histograms) >= 3
    assert all(n.endswith("_seconds") for n in histograms), histograms


@pytest.fixture
def sdk_endpoint() -> Iterator[str]:
    """Stands in for the Temporal core's Prometheus endpoint."""
    body = b'# TYPE temporal_request counter\ntemporal_request_total{operation="PollActivityTaskQueue"} 3\n'

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_the_bridge_re_exposes_the_sdk_metrics(sdk_endpoint: str) -> None:
    families = list(metrics.TemporalMetricsBridge(sdk_endpoint).collect())
    assert [(s.name, s.value) for f in families for s in f.samples] == [("temporal_request_total", 3.0)]
    assert list(metrics.TemporalMetricsBridge("http://127.0.0.1:1/metrics", 0.5).collect()) == []


def test_the_statuses_other_activities_carry_count_as_the_nodes_first_and_last() -> None:
    updating = StatusNote(phase=NodePhase.IN_PROGRESS, reason="Updating")
    done = StatusNote(phase=NodePhase.COMPLETE, reason="Complete")
    status = NodeStatusRequest(profile="p", node="n", phase=NodePhase.FAILED, reason="X")
    assert interceptor.shown_before(NAMES.SET_NODE_STATUS, status) is NodePhase.FAILED
    assert interceptor.shown_before(
        NAMES.CORDON, CordonRequest(profile="p", node="n", show_before=updating)
    ) is (NodePhase.IN_PROGRESS)
    assert interceptor.shown_before(NAMES.CORDON, CordonRequest(profile="p", node="n")) is None
    uncordon = UncordonRequest(profile="p", node="n", show_after=done)
    assert interceptor.shown_after(uncordon, True) is NodePhase.COMPLETE
    stages = StagesRequest(
        profile="p",
        node="n",
        stages=(
            stage_request(Stage.APPLY, show_before=updating),
            stage_request(Stage.CONFIG, show_after=done),
        ),
    )
    assert interceptor.shown_before(NAMES.RUN_STAGES, stages) is NodePhase.IN_PROGRESS
    passed = StageReport(job="j", outcome=StageOutcome.SUCCEEDED)
    failed = StageReport(job="j", outcome=StageOutcome.FAILED)
    assert interceptor.shown_after(stages, StagesReport(reports=(passed, passed))) is NodePhase.COMPLETE
    # Stages that did not all pass show nothing after them.
    assert interceptor.shown_after(stages, StagesReport(reports=(passed, failed))) is None
    assert interceptor.shown_after(stages, StagesReport(reports=(passed,), stopped=True)) is None
    assert interceptor.shown_after(NodeTarget(profile="p", node="n"), None) is None


def test_health_measurements_and_gate_outcomes_are_counted() -> None:
    measured = Measurement(check="xid", phase=CheckPhase.FAILED, value=[3.0])
    interceptor.record_result(NAMES.MEASURE, {"profile": "gated"}, measured, 0.1, "succeeded")
    assert value("fleetwright_health_measurements_total", profile="gated", check="xid", phase="Failed") == 1
    failed = NodeStatusRequest(
        profile="gated", node="n", phase=NodePhase.FAILED, reason=NodeReason.GATE_FAILED
    )
    interceptor.record_gate("gated", failed, "succeeded")
    passed = UncordonRequest(
        profile="gated",
        node="m",
        show_after=StatusNote(phase=NodePhase.COMPLETE, reason=NodeReason.GATE_PASSED),
    )
    interceptor.record_gate("gated", passed, "succeeded")
    interceptor.record_gate("gated", passed, "failed")  # an attempt that failed showed nothing
    assert value("fleetwright_health_gates_total", profile="gated", gate="node", outcome="failed") == 1
    assert value("fleetwright_health_gates_total", profile="gated", gate="node", outcome="passed") == 1
    assert value("fleetwright_health_gates_total", profile="gated", gate="node", outcome="inconclusive") == 0
    assert (
        value(
            "fleetwright_health_gates_total", profile="gated", gate="node", outcome="monitoring_unavailable"
        )
        == 0
    )
    # The first Errors name the wait (InProgress) but hold nothing yet: not counted.
    named = NodeStatusRequest(
        profile="gated", node="o", phase=NodePhase.IN_PROGRESS, reason=NodeReason.MONITORING_UNAVAILABLE
    )
    interceptor.record_gate("gated", named, "succeeded")
    assert (
        value(
            "fleetwright_health_gates_total", profile="gated", gate="node", outcome="monitoring_unavailable"
        )
        == 0
    )
    held = named.model_copy(update={"phase": NodePhase.BLOCKED})
    interceptor.record_gate("gated", held, "succeeded")
    assert (
        value(
            "fleetwright_health_gates_total", profile="gated", gate="node", outcome="monitoring_unavailable"
        )
        == 1
    )
    assert value("fleetwright_health_gates_total", profile="gated", gate="node", outcome="failed") == 1


def test_fleet_gate_outcomes_are_counted_apart_from_node_gates() -> None:
    profile = examples.profile("fleet")
    now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    state = begin(convert.rollout_spec(profile, examples.policy(max_unavailable=1)), now)
    request = DecideRequest(now=now, profile=profile, state=state)
    plain = decide(state, Observations(), now)
    interceptor.record_result(
        NAMES.OBSERVE_AND_DECIDE, {}, DecideReport(decision=plain), 0.1, "succeeded", request=request
    )
    assert value("fleetwright_health_gates_total", profile="fleet", gate="soak", outcome="passed") is None
    reached = (
        FleetGateOutcome(step="soak", outcome=CheckPhase.MONITORING_UNAVAILABLE),
        FleetGateOutcome(step="soak", outcome=CheckPhase.SUCCESSFUL),
        FleetGateOutcome(step="batches", outcome=CheckPhase.FAILED),
    )
    report = DecideReport(decision=plain.model_copy(update={"fleet_gates": reached}))
    interceptor.record_result(NAMES.OBSERVE_AND_DECIDE, {}, report, 0.1, "succeeded", request=request)

    def gates(gate: str, outcome: str) -> float | None:
        return value("fleetwright_health_gates_total", profile="fleet", gate=gate, outcome=outcome)

    assert gates("soak", "monitoring_unavailable") == 1
    assert gates("soak", "passed") == 1
    assert gates("soak", "failed") == 0  # shown at zero once the gate was seen
    assert gates("batches", "failed") == 1
    assert gates("node", "passed") is None  # no node gate ran


def test_a_hardware_suspect_node_is_one_until_it_passes_or_is_released() -> None:
    suspect = NodeStatusRequest(
        profile="held", node="n1", phase=NodePhase.FAILED, reason=NodeReason.HARDWARE_SUSPECT
    )
    interceptor.record_gate("held", suspect, "succeeded")
    assert value("fleetwright_node_hardware_suspect", profile="held", node="n1") == 1
    released = UncordonRequest(
        profile="held",
        node="n1",
        show_after=StatusNote(phase=NodePhase.COMPLETE, reason=NodeReason.RELEASED),
    )
    interceptor.record_gate("held", released, "succeeded")
    assert value("fleetwright_node_hardware_suspect", profile="held", node="n1") is None
