"""Retry policies and timeouts per activity kind: the one mapping from the error taxonomy to
Temporal. Activities convert permanent errors into non-retryable ``ApplicationError``s, so a
policy only bounds the backoff of retryable ones."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from fleetwright.workflows.enginesettings import EngineSettings

# Quick Kubernetes calls (cordon, record state): retry transient API trouble for a while.
API_CALL = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)
API_CALL_TIMEOUT = timedelta(seconds=60)

# A campaign's fleet-gate measurement in a member cluster: a few attempts, then (a member that
# cannot be reached, or no worker for it) the workflow records an Error measurement, which holds
# the gate (MonitoringUnavailable) instead of holding the campaign's loop.
GATE_MEASURE = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)
GATE_MEASURE_TIMEOUT = timedelta(minutes=2)
"""From scheduled to closed, retries included."""

# Long waits (drain, stage Job, reboot) heartbeat; a lost worker is noticed within the heartbeat
# timeout (``heartbeat``) and the activity resumes (idempotently) on another attempt.
LONG_WAIT = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
)


def heartbeat(settings: EngineSettings) -> timedelta:
    """The heartbeat timeout of the long waits (``engine.heartbeat_timeout_seconds``). Not compared
    on replay: Temporal matches a scheduled activity by its id and type, never its timeouts."""
    return timedelta(seconds=settings.heartbeat_timeout_seconds)
