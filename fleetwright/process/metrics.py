"""fleetwright's Prometheus metrics and the one ``/metrics`` endpoint of a process.

Owns the metric definitions (``fleetwright_*``, Prometheus naming: units in names, ``_total``
counters, ``_seconds`` histograms), the functions that record them, the endpoint, and the bridge
that re-exposes the Temporal SDK's own metrics (``temporal_*``) on the same endpoint: the SDK's
Rust core serves them on a private loopback port and each scrape of ours folds them in, so one
scrape target has both. It must not decide anything: callers record what happened.

Where the numbers come from: profile-level gauges from the controller's status mirror
(``record_progress``, the workflow's published progress); durations and Job failures from the
worker's activity interceptor (``worker.interceptor``).
"""

from __future__ import annotations

import logging
import socket
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from temporalio.runtime import PrometheusConfig

from fleetwright.process.temporalclient import install_runtime
from fleetwright.workflows.payloads import Progress

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry()

# Node states of ``fleetwright_nodes``: every targeted node is in exactly one.
NODE_STATES = ("updated", "running", "failed", "blocked", "pending")
# Seconds: a stage Job takes seconds to an hour (driver builds); a drain up to days (PDBs).
_STAGE_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, float("inf"))
_DRAIN_BUCKETS = (0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600, float("inf"))
_NODE_BUCKETS = (5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 4 * 3600, float("inf"))

NODES = Gauge(
    "fleetwright_nodes",
    "Nodes targeted by a profile, by state (updated, running, failed, blocked, pending).",
    ["profile", "state"],
    registry=REGISTRY,
)
ROLLOUT_PHASE = Gauge(
    "fleetwright_rollout_phase",
    "1 for the rollout's current phase (Progressing, Soaking, Paused, Halted, Complete, ...), else 0.",
    ["profile", "phase"],
    registry=REGISTRY,
)
ROLLOUT_STEP = Gauge(
    "fleetwright_rollout_step_info",
    "1 for the policy step the rollout is in (canary, soak, batch ...).",
    ["profile", "step"],
    registry=REGISTRY,
)
ROLLOUT_MAX_UNAVAILABLE = Gauge(
    "fleetwright_rollout_max_unavailable_nodes",
    "The rollout's maxUnavailable cap in nodes.",
    ["profile"],
    registry=REGISTRY,
)
ROLLOUT_BLOCKED = Gauge(
    "fleetwright_rollout_blocked_nodes",
    "Nodes the rollout cannot start yet, by the kind of reason (budget, window, failed earlier ...).",
    ["profile", "reason"],
    registry=REGISTRY,
)
ROLLOUT_WAITING = Gauge(
    "fleetwright_rollout_waiting_nodes",
    "Nodes the rollout holds until something clears by itself, by the kind of reason (WaitingForUnit, "
    "WaitingForWorkloads, Budget, OutsideWindow ...), of the first 20 waiting nodes its progress lists.",
    ["profile", "reason"],
    registry=REGISTRY,
)
DRAINS_BLOCKED = Gauge(
    "fleetwright_drains_blocked",
    "Drains currently held, by reason (PodDisruptionBudget, MultiplePodDisruptionBudgets, ...).",
    ["profile", "reason"],
    registry=REGISTRY,
)
DRAIN_BLOCKED_SECONDS = Counter(
    "fleetwright_drain_blocked_seconds_total",
    "Seconds finished drains spent held by PodDisruptionBudgets.",
    ["profile"],
    registry=REGISTRY,
)
STAGE_DURATION = Histogram(
    "fleetwright_stage_duration_seconds",
    "Duration of one package stage Job on a node.",
    ["profile", "package", "stage", "outcome"],
    buckets=_STAGE_BUCKETS,
    registry=REGISTRY,
)
STAGE_JOB_FAILURES = Counter(
    "fleetwright_stage_job_failures_total",
    "Stage Jobs that did not succeed (Failed, ImagePullFailed, DeadlineExceeded).",
    ["profile", "package", "stage", "outcome"],
    registry=REGISTRY,
)
HEALTH_MEASUREMENTS = Counter(
    "fleetwright_health_measurements_total",
    "Health-check measurements taken by node gates, by check and phase (Successful, Failed, "
    "Inconclusive, Error).",
    ["profile", "check", "phase"],
    registry=REGISTRY,
)
HEALTH_GATES = Counter(
    "fleetwright_health_gates_total",
    "Health gates that ended, by gate (node; soak or batches: a fleet gate) and outcome: passed "
    "(for batches, each run of a check that passed), failed (a check Failed, or a node gate's "
    "abort), inconclusive (waiting for a human); and monitoring_unavailable: gates held because "
    "Prometheus did not answer (counted when the hold begins; it lifts by itself).",
    ["profile", "gate", "outcome"],
    registry=REGISTRY,
)
GATE_KINDS = ("node", "soak", "batches")
GATE_OUTCOMES = ("passed", "failed", "inconclusive", "monitoring_unavailable")
HARDWARE_SUSPECT = Gauge(
    "fleetwright_node_hardware_suspect",
    "1 while a node is held cordoned as hardware suspect: its health gate failed, and failed again "
    "(or did not pass) on the version a rollback returned it to. Gone once it passes a gate or is "
    "released. Set by the worker that showed the status.",
    ["profile", "node"],
    registry=REGISTRY,
)
DRAIN_DURATION = Histogram(
    "fleetwright_drain_duration_seconds",
    "Duration of one node drain (one activity attempt), by outcome.",
    ["profile", "outcome"],
    buckets=_DRAIN_BUCKETS,
    registry=REGISTRY,
)
NODE_UPDATE_DURATION = Histogram(
    "fleetwright_node_update_duration_seconds",
    "Duration of one node's update, from its first status to Complete or Failed.",
    ["profile", "outcome"],
    buckets=_NODE_BUCKETS,
    registry=REGISTRY,
)
ACTIVITY_DURATION = Histogram(
    "fleetwright_activity_duration_seconds",
    "Duration of each fleetwright activity attempt, by activity and outcome.",
    ["activity", "outcome"],
    registry=REGISTRY,
)
# The drain reasons a dashboard shows even at zero.
DRAIN_REASONS = ("PodDisruptionBudget", "MultiplePodDisruptionBudgets", "DrainTimeout")
STAGE_FAILURE_OUTCOMES = ("Failed", "ImagePullFailed", "DeadlineExceeded")
# The planner's kinds of "cannot start yet" (the text before the colon), shown even at zero.
BLOCKED_KINDS = ("Budget", "OutsideWindow", "NeverFits", "FailedEarlier")
# The kinds of "waits for something that clears by itself" a dashboard shows even at zero.
WAITING_KINDS = ("WaitingForUnit", "WaitingForWorkloads")


# ----- recording ---------------------------------------------------------------------------------
@dataclass
class _Shown:
    """The label values last set for a profile, so a phase, step or reason that ended is cleared."""

    phase: str = ""
    step: str = ""
    blocked: frozenset[str] = frozenset()
    waiting: frozenset[str] = frozenset()


_shown: dict[str, _Shown] = {}


def node_counts(progress: Progress) -> dict[str, int]:
    """Every targeted node in exactly one state."""
    busy = progress.updated + progress.running + progress.failed + progress.blocked
    return {
        "updated": progress.updated,
        "running": progress.running,
        "failed": progress.failed,
        "blocked": progress.blocked,
        "pending": max(0, progress.targeted - busy),
    }


def blocked_kinds(progress: Progress) -> dict[str, int]:
    """Blocked nodes by the kind of reason (the text before the first colon)."""
    return _kinds(progress.blocked_reasons.values(), BLOCKED_KINDS)


def waiting_kinds(progress: Progress) -> dict[str, int]:
    """The listed waiting nodes by the kind of reason."""
    return _kinds(progress.waiting_reasons.values(), WAITING_KINDS)


def _kinds(reasons: Iterable[str], shown: tuple[str, ...]) -> dict[str, int]:
    kinds = dict.fromkeys(shown, 0)
    for reason in reasons:
        kind = reason.split(":", 1)[0].strip() or "Unknown"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def record_progress(profile: str, progress: Progress | None) -> None:
    """Profile-level gauges from the rollout's published progress (None: no rollout yet)."""
    if progress is None:
        return
    for state, count in node_counts(progress).items():
        NODES.labels(profile, state).set(count)
    shown = _shown.get(profile, _Shown())
    step = progress.step or "none"
    kinds = blocked_kinds(progress)
    if shown.phase and shown.phase != progress.phase:
        ROLLOUT_PHASE.labels(profile, shown.phase).set(0)
    if shown.step and shown.step != step:
        ROLLOUT_STEP.remove(profile, shown.step)
    waiting = waiting_kinds(progress)
    for gone in shown.blocked - set(kinds):
        ROLLOUT_BLOCKED.labels(profile, gone).set(0)
    for gone in shown.waiting - set(waiting):
        ROLLOUT_WAITING.labels(profile, gone).set(0)
    ROLLOUT_PHASE.labels(profile, progress.phase).set(1)
    ROLLOUT_STEP.labels(profile, step).set(1)
    ROLLOUT_MAX_UNAVAILABLE.labels(profile).set(progress.max_unavailable)
    for kind, count in kinds.items():
        ROLLOUT_BLOCKED.labels(profile, kind).set(count)
    for kind, count in waiting.items():
        ROLLOUT_WAITING.labels(profile, kind).set(count)
    _shown[profile] = _Shown(progress.phase, step, shown.blocked | set(kinds), shown.waiting | set(waiting))


# ----- the endpoint and the Temporal SDK bridge ----------------------------------------------------
@dataclass(eq=False)  # registries key collectors by identity
class TemporalMetricsBridge(Collector):
    """Re-exposes the Temporal SDK's Prometheus text (served by the core on ``url``) at scrape time."""

    url: str
    timeout_seconds: float = 2.0

    def collect(self) -> Iterator[Metric]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout_seconds) as response:
                text = response.read().decode()
        except OSError as error:
            log.debug("temporal SDK metrics unavailable: %s", error)
            return
        yield from text_string_to_metric_families(text)


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install_temporal_runtime(process: str) -> TemporalMetricsBridge:
    """Make the process's Temporal runtime export SDK metrics with conventional Prometheus names
    (``_total`` counters, ``_seconds`` durations) on a private loopback port, and return the
    bridge that folds them into our endpoint. Call before the process connects to Temporal."""
    address = f"127.0.0.1:{_free_loopback_port()}"
    install_runtime(
        metrics=PrometheusConfig(
            bind_address=address,
            counters_total_suffix=True,
            unit_suffix=True,
            durations_as_seconds=True,
        ),
        global_tags={"fleetwright_process": process},
    )
    return TemporalMetricsBridge(f"http://{address}/metrics")


def serve(port: int, host: str, process: str) -> None:
    """Start the process's ``/metrics`` endpoint (a daemon thread); port 0 disables it."""
    if port == 0:
        return
    REGISTRY.register(install_temporal_runtime(process))
    start_http_server(port, addr=host, registry=REGISTRY)
    log.info("metrics on http://%s:%d/metrics", host, port)


def names_in(text: str) -> set[str]:
    """Every sample name in a Prometheus text exposition (what a dashboard query can refer to)."""
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
