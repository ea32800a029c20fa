"""Health-check analysis, pure: a query's answer -> a typed measurement, and a check's
measurements -> its outcome, by Argo Rollouts' counting rules except for Errors.

A measurement is Successful, Failed, Inconclusive (no data, or neither condition holds) or Error
(the query or the condition could not be evaluated). An Error says nothing about the nodes, so it
does not use up the check's ``count``: the measurement is taken again one interval later. A check
ends as soon as its outcome is known: Failed once its failed measurements exceed
``failureLimit``, Inconclusive once its inconclusive ones exceed ``inconclusiveLimit``, else
Successful after ``count`` measurements that were not Error. More than ``consecutiveErrorLimit``
Errors in a row make it MonitoringUnavailable, a hold that is no outcome: measuring goes on and
the first measurement that is not an Error lifts it. A gate (several checks) fails when one fails,
waits for a human when one is Inconclusive, holds while one is MonitoringUnavailable and passes
when all passed. Owns those rules, the bound on the Errors a long outage keeps, and the parsing
of Prometheus' instant-query answer; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import StrEnum
from functools import cache
from typing import Any

from fleetwright.api.health import MetricCheck
from fleetwright.api.healthcondition import (
    CompiledCondition,
    ConditionError,
    compile_condition,
    evaluate,
    oversized,
)
from fleetwright.errors import QueryRejectedError
from fleetwright.planner.base import Frozen

Result = float | list[float]


class CheckPhase(StrEnum):
    SUCCESSFUL = "Successful"
    FAILED = "Failed"
    INCONCLUSIVE = "Inconclusive"
    ERROR = "Error"
    """Only for a measurement: a check's Errors hold it (MONITORING_UNAVAILABLE), never end it."""
    RUNNING = "Running"
    """Only for a check's outcome: more measurements to take."""
    MONITORING_UNAVAILABLE = "MonitoringUnavailable"
    """Only for a check's outcome: more than ``consecutiveErrorLimit`` Errors in a row; the check
    holds and keeps measuring until a measurement is not an Error."""


ENDED = frozenset({CheckPhase.SUCCESSFUL, CheckPhase.FAILED, CheckPhase.INCONCLUSIVE})
"""The outcomes that end a check: it takes no more measurements."""
HELD = frozenset({CheckPhase.INCONCLUSIVE, CheckPhase.MONITORING_UNAVAILABLE})
"""The outcomes that hold a gate for Prometheus or a human (approve or abort end the hold too)."""


class Measurement(Frozen):
    """One measurement of one check, as recorded in the workflow history."""

    check: str
    phase: CheckPhase
    value: Result | None = None
    """The query's result (None: no answer)."""
    message: str = ""


class ScopedMeasurement(Frozen):
    """A fleet-gate measurement, for the soak step ``step`` of scope ``scope``."""

    scope: str
    step: int
    measurement: Measurement


class CheckState(Frozen):
    """Where one check stands after its measurements so far."""

    check: str
    outcome: CheckPhase
    measured: int = 0
    """Measurements taken, Errors included (those the state holds: a long outage keeps few)."""
    counted: int = 0
    """Measurements that were not Error: those that count towards ``count``."""
    count: int = 1
    failed: int = 0
    inconclusive: int = 0
    errors_in_a_row: int = 0
    last: Measurement | None = None

    def describe(self) -> str:
        last = self.last
        value = "" if last is None else f", last {last.phase.value} {_show(last.value)}"
        detail = f": {last.message}" if last is not None and last.message else ""
        errors = f", {self.errors_in_a_row} Error(s) in a row" if self.errors_in_a_row else ""
        return f"{self.check} {self.outcome.value} ({self.counted}/{self.count}{value}{errors}){detail}"


@cache
def _compiled(condition: str) -> CompiledCondition:
    return compile_condition(condition)


def classify(check: MetricCheck, result: Result | None) -> Measurement:
    """The measurement of ``check`` whose query answered ``result`` (None or [] is no data)."""
    if result is None or result == []:
        return Measurement(check=check.name, phase=CheckPhase.INCONCLUSIVE, value=result, message="no data")
    if (too_long := oversized(result)) is not None:
        return Measurement(check=check.name, phase=CheckPhase.ERROR, message=f"condition {too_long}")
    try:
        phase, message = _judged(check, result)
    except ConditionError as error:
        return Measurement(
            check=check.name, phase=CheckPhase.ERROR, value=result, message=f"condition {error}"
        )
    return Measurement(check=check.name, phase=phase, value=result, message=message)


def _judged(check: MetricCheck, result: Result) -> tuple[CheckPhase, str]:
    """Argo Rollouts' rule: failure wins; with both conditions, neither is Inconclusive; one
    condition alone decides both ways."""
    success, failure = check.success_condition, check.failure_condition
    if failure is not None and evaluate(_compiled(failure), result):
        return CheckPhase.FAILED, f"{failure} holds"
    if success is None or evaluate(_compiled(success), result):
        return CheckPhase.SUCCESSFUL, ""
    if failure is None:
        return CheckPhase.FAILED, f"{success} does not hold"
    return CheckPhase.INCONCLUSIVE, "neither condition holds"


def error(check: MetricCheck, message: str) -> Measurement:
    """A measurement whose query could not be answered."""
    return Measurement(check=check.name, phase=CheckPhase.ERROR, message=message)


def judge(check: MetricCheck, measurements: Sequence[Measurement]) -> CheckState:
    """The check's state after ``measurements`` (in the order they were taken)."""
    state = CheckState(check=check.name, outcome=CheckPhase.RUNNING, count=check.count)
    counted = failed = inconclusive = in_a_row = 0
    for measured, measurement in enumerate(measurements, start=1):
        errored = measurement.phase is CheckPhase.ERROR
        in_a_row = in_a_row + 1 if errored else 0
        counted += not errored
        failed += measurement.phase is CheckPhase.FAILED
        inconclusive += measurement.phase is CheckPhase.INCONCLUSIVE
        state = CheckState(
            check=check.name,
            outcome=_outcome(check, counted, failed, inconclusive, in_a_row),
            measured=measured,
            counted=counted,
            count=check.count,
            failed=failed,
            inconclusive=inconclusive,
            errors_in_a_row=in_a_row,
            last=measurement,
        )
        if state.outcome in ENDED:
            break
    return state


def _outcome(check: MetricCheck, counted: int, failed: int, inconclusive: int, in_a_row: int) -> CheckPhase:
    if failed > check.failure_limit:
        return CheckPhase.FAILED
    if inconclusive > check.inconclusive_limit:
        return CheckPhase.INCONCLUSIVE
    if counted >= check.count:
        return CheckPhase.SUCCESSFUL
    if in_a_row > check.consecutive_error_limit:
        # Argo Rollouts fails the analysis here; a monitoring outage says nothing about the nodes,
        # so the check holds instead and the next answer lifts the hold.
        return CheckPhase.MONITORING_UNAVAILABLE
    return CheckPhase.RUNNING


def replaces(check: MetricCheck, measurements: Sequence[Measurement], new: Measurement) -> bool:
    """Whether ``new``, taken after ``measurements``, replaces the last of them instead of
    following it: an Error while the check is already MonitoringUnavailable. The hold needs only
    ``consecutiveErrorLimit`` + 1 Errors in a row, so an outage of days keeps that many (the last
    with the latest reason), not one per interval."""
    if new.phase is not CheckPhase.ERROR or not measurements:
        return False
    return judge(check, measurements).outcome is CheckPhase.MONITORING_UNAVAILABLE


def gap_before(check: MetricCheck, measured: int) -> int:
    """Seconds before a check's next measurement when it has ``measured`` so far: its initial
    delay (from the gate's start) before the first, its interval (from the last) after that,
    Errors included. The one schedule of the node gate and both fleet gates."""
    return check.initial_delay_seconds if measured == 0 else check.interval_seconds


def recorded(check: MetricCheck, measurements: Sequence[Measurement], new: Measurement) -> list[Measurement]:
    """``measurements`` with ``new`` taken after them (``replaces`` says how)."""
    kept = list(measurements[:-1] if replaces(check, measurements, new) else measurements)
    return [*kept, new]


def unavailable(check: MetricCheck, state: CheckState) -> str | None:
    """A check that is waiting on Prometheus, named from its first Error in a row (None: its last
    measurement was not an Error, or it ended): ``xid MonitoringUnavailable (1 Error in a row,
    held after 2; 0/3 counted): PrometheusUnavailable ...``. Before ``consecutiveErrorLimit`` is
    passed it only names the wait; past it the wait is a hold."""
    if not state.errors_in_a_row or state.outcome in ENDED:
        return None
    after = check.consecutive_error_limit + 1
    if state.outcome is CheckPhase.MONITORING_UNAVAILABLE:
        # A long outage keeps only ``after`` Errors in the state (``replaces``).
        errors = f"held: {after} or more Errors in a row"
    else:
        plural = "" if state.errors_in_a_row == 1 else "s"
        errors = f"{state.errors_in_a_row} Error{plural} in a row, held after {after}"
    reason = state.last.message if state.last is not None and state.last.message else "no answer"
    counted = f"{state.counted}/{state.count} counted"
    return f"{check.name} {CheckPhase.MONITORING_UNAVAILABLE.value} ({errors}; {counted}): {reason}"


def unavailable_checks(checks: Iterable[MetricCheck], states: Iterable[CheckState]) -> str:
    """Every check of a gate waiting on Prometheus (``unavailable``), ``; ``-joined ("" if none)."""
    by_name = {s.check: s for s in states}
    named = (unavailable(c, by_name[c.name]) for c in checks if c.name in by_name)
    return "; ".join(n for n in named if n is not None)


def gate_outcome(states: Iterable[CheckState]) -> CheckPhase:
    """A gate's outcome: Failed as soon as a check is, else Inconclusive as soon as one is, else
    MonitoringUnavailable while one is, else Successful once every check passed."""
    outcomes = [s.outcome for s in states]
    for phase in (
        CheckPhase.FAILED,
        CheckPhase.INCONCLUSIVE,
        CheckPhase.MONITORING_UNAVAILABLE,
        CheckPhase.RUNNING,
    ):
        if phase in outcomes:
            return phase
    return CheckPhase.SUCCESSFUL


def parse_answer(body: Any) -> Result:
    """The sample values of Prometheus' instant-query answer (``/api/v1/query``), ordered by their
    series' labels; QueryRejectedError for an error answer or a range (matrix) result."""
    if not isinstance(body, dict) or body.get("status") != "success":
        what = body.get("error", "no error text") if isinstance(body, dict) else "not a JSON object"
        raise QueryRejectedError(f"Prometheus refused the query: {what}")
    data = body.get("data") or {}
    kind: Any = data.get("resultType")
    result: Any = data.get("result")
    try:
        if kind == "scalar":
            return _number(result[1])
        if kind == "vector":
            ordered = sorted(result, key=lambda s: sorted(s.get("metric", {}).items()))
            return [_number(sample["value"][1]) for sample in ordered]
    except (TypeError, KeyError, IndexError, ValueError) as exc:
        raise QueryRejectedError(f"Prometheus sent a malformed {kind} result: {exc}") from None
    raise QueryRejectedError(f"the query gives a {kind} result; a check needs an instant vector or scalar")


def _number(text: Any) -> float:
    return float(text)


def _show(value: Result | None) -> str:
    if value is None:
        return "no answer"
    if isinstance(value, list):
        shown = ", ".join(_short(v) for v in value[:4])
        more = f", … {len(value)} values" if len(value) > 4 else ""
        return f"[{shown}{more}]"
    return _short(value)


def _short(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return f"{value:g}"
