"""The health-check measurement activity: one Prometheus instant query (``/api/v1/query``) for one
check of a node gate, judged by the pure ``planner.analysis`` into a typed measurement.

Thin: render the query's placeholders, ask Prometheus, parse and classify. A Prometheus that cannot
be reached or refuses the query is an Error *measurement* (returned, so it is recorded once in the
history and counts toward the check's consecutiveErrorLimit), never a retried activity; only a
crashed worker makes Temporal run it again. Credentials (a bearer token or a basic-auth password,
read from files a mounted Secret provides) are sent, never logged or returned. Before its query it
may show the node's gate status (``show_before``), so a measurement costs one activity.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3
from temporalio import activity

from fleetwright.activities import nodeprogress, report
from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import (
    NAMES,
    ExternalVerdict,
    ExternalWaitRequest,
    MeasureRequest,
    PrometheusAccess,
)
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window
from fleetwright.api.health import ExternalValidator, render_query
from fleetwright.errors import (
    FleetwrightError,
    PrometheusUnavailableError,
    QueryRejectedError,
)
from fleetwright.kube import nodestatus
from fleetwright.kube.client import ApiClient
from fleetwright.planner import fleetgate
from fleetwright.planner.analysis import Measurement, ScopedMeasurement, classify, error, parse_answer
from fleetwright.planner.rolloutstate import RolloutState

QUERY_PATH = "/api/v1/query"


class Prometheus:
    """Instant queries against one Prometheus server with the configured auth and CA bundle."""

    def __init__(self, access: PrometheusAccess) -> None:
        self.access = access
        self._pool: urllib3.PoolManager | None = None

    def query(self, promql: str) -> Any:
        """The decoded JSON answer; PrometheusUnavailableError or QueryRejectedError."""
        if not self.access.url:
            raise PrometheusUnavailableError(
                "no Prometheus address is configured (setting prometheus_url)",
                reason="PrometheusNotConfigured",
            )
        url = self.access.url.rstrip("/") + QUERY_PATH + "?" + urlencode({"query": promql})
        try:
            response = self._manager().request(
                "GET", url, headers=self._headers(), timeout=self.access.timeout_seconds, retries=False
            )
        except urllib3.exceptions.HTTPError as exc:
            raise PrometheusUnavailableError(
                f"Prometheus at {self.access.url} unreachable: {type(exc).__name__}"
            ) from None
        if response.status >= 500:
            raise PrometheusUnavailableError(f"Prometheus answered HTTP {response.status}")
        if response.status in (401, 403):
            raise QueryRejectedError(f"Prometheus refused the credentials (HTTP {response.status})")
        try:
            return json.loads(response.data)
        except ValueError:
            raise QueryRejectedError(f"Prometheus answered HTTP {response.status} with no JSON") from None

    def _manager(self) -> urllib3.PoolManager:
        if self._pool is None:
            ca = self.access.ca_file
            self._pool = urllib3.PoolManager(ca_certs=ca) if ca else urllib3.PoolManager()
        return self._pool

    def _headers(self) -> dict[str, str]:
        access = self.access
        if access.bearer_token_file:
            token = _secret(access.bearer_token_file)
            return {"Authorization": f"Bearer {token}"}
        if access.basic_auth_user:
            password = _secret(access.basic_auth_password_file) if access.basic_auth_password_file else ""
            pair = base64.b64encode(f"{access.basic_auth_user}:{password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {}


def _secret(path: str) -> str:
    """A credential file's content (a mounted Secret's key), read at every query so a rotated
    Secret takes effect; its content never reaches an error message."""
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise QueryRejectedError(
            f"cannot read the Prometheus credential file {path}: {exc.strerror}"
        ) from None


class Querier(Protocol):
    def query(self, promql: str) -> Any: ...


def measure(prometheus: Querier, request: MeasureRequest) -> Measurement:
    """One measurement of ``request.check``: an answer judged, or an Error naming why there is none."""
    promql = render_query(request.check.query, dict(request.placeholders))
    try:
        return classify(request.check, parse_answer(prometheus.query(promql)))
    except FleetwrightError as exc:
        return error(request.check, f"{exc.reason}: {exc}")


def external_verdict(
    validator: ExternalValidator, facts: nodestatus.NodeFacts, since: str
) -> ExternalVerdict | None:
    """The validator's verdict on the node, or None while it has given none: a condition that
    turned at or after ``since`` (RFC 3339), or the annotation."""
    name = validator.name
    if validator.condition_type is not None:
        condition = facts.conditions.get(validator.condition_type)
        turned = facts.transitions.get(validator.condition_type, "")
        # The API server keeps whole seconds: a condition that turned in the second the update
        # began counts as turned since.
        if condition is None or not turned or _instant(turned) < _instant(since).replace(microsecond=0):
            return None
        passed = condition.status == validator.condition_status
        shown = f"condition {condition.type}={condition.status}" + (
            f" ({condition.message})" if condition.message else ""
        )
        return ExternalVerdict(validator=name, passed=passed, message=shown)
    assert validator.annotation is not None
    value = facts.annotations.get(validator.annotation)
    if value is None:
        return None
    passed = value == validator.annotation_value
    return ExternalVerdict(
        validator=name, passed=passed, message=f"annotation {validator.annotation}={value}"
    )


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def measure_fleet(prometheus: Querier, state: RolloutState, now: datetime) -> tuple[ScopedMeasurement, ...]:
    """The fleet-gate measurements due at ``now`` (``planner.fleetgate.due``), taken."""
    taken = []
    for due in fleetgate.due(state, now):
        request = MeasureRequest(
            profile=state.spec.profile, node="", check=due.check, placeholders=due.placeholders
        )
        measured = measure(prometheus, request)
        taken.append(ScopedMeasurement(scope=due.scope, step=due.step, measurement=measured))
    return tuple(taken)


class HealthActivities:
    """The measurement activity, bound to one Prometheus and one API client (for the status)."""

    def __init__(self, api: ApiClient, access: PrometheusAccess, *, executor: Executor | None = None) -> None:
        self.api = api
        self.prometheus = Prometheus(access)
        self.executor = executor or ThreadPoolExecutor(8, thread_name_prefix="fleetwright-health")

    @activity.defn(name=NAMES.MEASURE)
    @temporal_errors
    async def measure(self, request: MeasureRequest) -> Measurement:
        note = request.show_before
        if note is not None:
            # A deleted node fails this with NodeGone: the node workflow ends as for any activity.
            await nodeprogress.show(
                self.executor, self.api, request, phase=note.phase, reason=note.reason, message=note.message
            )
            await report.send(note.report)
        return await blocking(self.executor, measure, self.prometheus, request)

    @activity.defn(name=NAMES.WAIT_EXTERNAL)
    @temporal_errors
    async def wait_external(self, request: ExternalWaitRequest) -> ExternalVerdict:
        """Until the validator's verdict shows on the node, or its timeout (counted from the first
        attempt) passes: a timeout is a failed verdict. An annotation verdict is removed once read."""
        validator, clock = request.validator, Clock()
        window = heartbeat_window()
        while True:
            facts, version = await blocking(
                self.executor, nodestatus.read_node_to_watch, self.api, request.node
            )
            verdict = external_verdict(validator, facts, request.since.isoformat())
            if verdict is not None:
                if validator.annotation is not None:
                    await blocking(
                        self.executor,
                        nodestatus.merge_metadata,
                        self.api,
                        request.node,
                        annotations={validator.annotation: None},
                    )
                return verdict
            if clock.elapsed() >= validator.timeout_seconds:
                message = f"no verdict within {validator.timeout_seconds}s ({validator.describe()})"
                return ExternalVerdict(validator=validator.name, passed=False, message=message)
            clock.beat()
            seconds = max(1.0, min(window, validator.timeout_seconds - clock.elapsed()))
            await blocking(self.executor, nodestatus.wait_for_node, self.api, request.node, version, seconds)


def health_activities(
    api: ApiClient, access: PrometheusAccess, *, executor: Executor | None = None
) -> list[Callable[..., Any]]:
    """The health activities, ready for ``Worker(activities=...)``."""
    bound = HealthActivities(api, access, executor=executor)
    return [bound.measure, bound.wait_external]
