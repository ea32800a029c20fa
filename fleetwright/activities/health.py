"""The health-check measurement activities: one Prometheus instant query (``/api/v1/query``, through
the ``fleetwright.prometheus`` adapter) for one check of a node gate, or of a campaign stage's
fleet gate over the nodes its rollout changed in a member cluster, judged by the pure
``planner.health.analysis`` into a typed measurement; and the external validators' wait.

Thin: render the query's placeholders, ask Prometheus, parse and classify. A Prometheus that cannot
be reached or refuses the query is an Error *measurement* (returned, so it is recorded once in the
history and counts toward the check's consecutiveErrorLimit), never a retried activity; only a
crashed worker makes Temporal run it again. Before its query it may show the node's gate status
(``show_before``), so a measurement costs one activity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from temporalio import activity

from fleetwright.activities import nodeprogress, report
from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import (
    NAMES,
    ChangedNodesMeasureRequest,
    ExternalVerdict,
    ExternalWaitRequest,
    MeasureRequest,
)
from fleetwright.activities.waiting import Clock, blocking, heartbeat_window
from fleetwright.api.health import ExternalValidator, nodes_alternation, render_query
from fleetwright.api.keys import state_key
from fleetwright.errors import (
    FleetwrightError,
)
from fleetwright.kube import nodes, nodestatus
from fleetwright.kube.client import ApiClient
from fleetwright.planner.health.analysis import Measurement, ScopedMeasurement, classify, error, parse_answer
from fleetwright.planner.rollout import fleetgate
from fleetwright.planner.rollout.state import RolloutState
from fleetwright.prometheus import Prometheus, PrometheusAccess, Querier


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
    """The fleet-gate measurements due at ``now`` (``planner.rollout.fleetgate.due``), taken."""
    taken = []
    for due in fleetgate.due(state, now):
        request = MeasureRequest(
            profile=state.spec.profile, node="", check=due.check, placeholders=due.placeholders
        )
        measured = measure(prometheus, request)
        taken.append(ScopedMeasurement(scope=due.scope, step=due.step, measurement=measured))
    return tuple(taken)


def changed_nodes(listed: Iterable[Mapping[str, Any]], profile: str) -> list[str]:
    """The nodes ``profile``'s rollout changed (its state is recorded on them), by name."""
    key = state_key(profile)
    return sorted(
        str(node["metadata"]["name"]) for node in listed if key in (node["metadata"].get("annotations") or {})
    )


class HealthActivities:
    """The measurement activities, bound to one Prometheus (another for a request that names one)
    and one API client (for the status, and the nodes a campaign's rollout changed)."""

    def __init__(self, api: ApiClient, access: PrometheusAccess, *, executor: Executor | None = None) -> None:
        self.api = api
        self.prometheus = Prometheus(access)
        self.executor = executor or ThreadPoolExecutor(8, thread_name_prefix="fleetwright-health")
        self._others: dict[str, Prometheus] = {}

    def _prometheus_at(self, url: str) -> Prometheus:
        """The configured Prometheus, or the one at ``url`` with the same credentials and CA."""
        if not url or url == self.prometheus.access.url:
            return self.prometheus
        if url not in self._others:
            self._others[url] = Prometheus(self.prometheus.access.model_copy(update={"url": url}))
        return self._others[url]

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

    @activity.defn(name=NAMES.MEASURE_CHANGED)
    @temporal_errors
    async def measure_changed(self, request: ChangedNodesMeasureRequest) -> Measurement:
        """One measurement of a campaign's fleet-gate check over the nodes its rollout changed in
        this cluster (``{{nodes}}``)."""
        listed = await blocking(self.executor, nodes.list_nodes, self.api)
        values = {
            "nodes": nodes_alternation(changed_nodes(listed, request.profile)),
            "profile": request.profile,
            "node": "",
        }
        measured = MeasureRequest(profile=request.profile, node="", check=request.check, placeholders=values)
        prometheus = self._prometheus_at(request.prometheus_url)
        return await blocking(self.executor, measure, prometheus, measured)

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
    return [bound.measure, bound.measure_changed, bound.wait_external]
