"""Metric checks, pure: the condition language (what compiles, what is refused, how it evaluates),
the query's placeholders, a query answer judged into a typed measurement, the counting rules
(failureLimit, inconclusiveLimit, consecutiveErrorLimit, count) and admission naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.activities.health import external_verdict
from fleetwright.api.health import ExternalValidator, MetricCheck, nodes_alternation, render_query
from fleetwright.api.healthcondition import ConditionError, compile_condition, evaluate
from fleetwright.api.validation import validate_deploymentpolicy
from fleetwright.errors import QueryRejectedError
from fleetwright.kube.nodestatus import NodeFacts, NodeStatusCondition
from fleetwright.planner.health.analysis import (
    ENDED,
    CheckPhase,
    CheckState,
    Measurement,
    classify,
    error,
    gate_outcome,
    judge,
    parse_answer,
    recorded,
    unavailable,
    unavailable_checks,
)

pytestmark = pytest.mark.unit


def holds(condition: str, result: float | list[float]) -> bool:
    return evaluate(compile_condition(condition), result)


@pytest.mark.parametrize(
    ("condition", "result", "expected"),
    [
        ("result[0] == 0", [0.0], True),
        ("result[0] == 0", [2.0], False),
        ("result < 1", 0.5, True),
        ("all(r < 5 for r in result)", [1.0, 4.0], True),
        ("all(r < 5 for r in result)", [1.0, 7.0], False),
        ("any(r > 0 for r in result if r != 3)", [3.0, 0.0], False),
        ("len(result) == 2 and max(result) - min(result) <= 1", [1.0, 2.0], True),
        ("not result[-1] > 2 or sum(result) % 2 == 0", [4.0, 3.0], False),
        ("-result[0] < 0", [1.0], True),
    ],
)
def test_conditions_evaluate_on_the_result(condition: str, result: Any, expected: bool) -> None:
    assert holds(condition, result) is expected


@pytest.mark.parametrize(
    ("condition", "named"),
    [
        ("__import__('os').system('x')", "only the functions"),
        ("result.__class__", "Attribute is not allowed"),
        ("open('/etc/passwd')", "only the functions"),
        ("x < 1", "unknown name 'x'"),
        ("result[0] = 1", "does not parse"),
        ("result[len(result)]", "whole number"),
        ("[r for r in result]", "list comprehension is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("'a' < 'b'", "not a number"),
        ("result ** 99", "Pow"),
        ("result[0] is 0", "Is"),
        ("max(result, key=abs)", "only the functions"),
    ],
)
def test_conditions_outside_the_language_are_refused(condition: str, named: str) -> None:
    with pytest.raises(ConditionError, match=named):
        compile_condition(condition)


def test_a_condition_that_cannot_be_evaluated_on_a_result_says_why() -> None:
    with pytest.raises(ConditionError, match="comparison takes numbers, but result is a list"):
        holds("result < 1", [0.0])
    with pytest.raises(ConditionError, match="index out of range"):
        holds("result[1] == 0", [0.0])
    with pytest.raises(ConditionError, match="not true or false"):
        holds("result[0] + 1", [0.0])


def test_placeholders_are_rendered_and_unknown_ones_refused() -> None:
    query = 'changes(DCGM_FI_DEV_XID_ERRORS{Hostname="{{node}}", profile=~"{{ profile }}"}[5m])'
    assert render_query(query, {"node": "n1", "profile": "p"}) == (
        'changes(DCGM_FI_DEV_XID_ERRORS{Hostname="n1", profile=~"p"}[5m])'
    )
    with pytest.raises(ValueError, match=r"unknown placeholder '\{\{host\}\}'"):
        check(query="up{instance='{{host}}'}", success_condition="result[0] == 1")
    with pytest.raises(ValueError, match="unclosed '\\('"):
        check(query="sum(rate(x[5m])", success_condition="result[0] == 1")
    with pytest.raises(ValueError, match="at least one of successCondition or failureCondition"):
        check(query="up")


def check(**fields: Any) -> MetricCheck:
    return MetricCheck.model_validate({"name": "xid", "query": "up", **fields})


BOTH = {"success_condition": "result[0] == 0", "failure_condition": "result[0] > 0"}


@pytest.mark.parametrize(
    ("fields", "result", "phase"),
    [
        (BOTH, [0.0], CheckPhase.SUCCESSFUL),
        (BOTH, [3.0], CheckPhase.FAILED),
        (BOTH, [-1.0], CheckPhase.INCONCLUSIVE),
        (BOTH, [], CheckPhase.INCONCLUSIVE),
        ({"success_condition": "result[0] == 0"}, [1.0], CheckPhase.FAILED),
        ({"failure_condition": "result[0] > 0"}, [0.0], CheckPhase.SUCCESSFUL),
        ({"success_condition": "result[0] == 0"}, None, CheckPhase.INCONCLUSIVE),
        ({"success_condition": "result[2] == 0"}, [0.0], CheckPhase.ERROR),
    ],
)
def test_a_result_is_judged_into_a_typed_measurement(
    fields: dict[str, str], result: Any, phase: CheckPhase
) -> None:
    assert classify(check(**fields), result).phase is phase


def test_failure_wins_over_success_and_no_data_is_named() -> None:
    both = check(success_condition="result[0] >= 0", failure_condition="result[0] > 0")
    failed = classify(both, [2.0])
    assert (failed.phase, failed.message) == (CheckPhase.FAILED, "result[0] > 0 holds")
    assert classify(both, []).message == "no data"


def outcomes(c: MetricCheck, phases: str) -> CheckState:
    by_letter = {
        "s": CheckPhase.SUCCESSFUL,
        "f": CheckPhase.FAILED,
        "i": CheckPhase.INCONCLUSIVE,
        "e": CheckPhase.ERROR,
    }
    return judge(c, [Measurement(check=c.name, phase=by_letter[p]) for p in phases])


@pytest.mark.parametrize(
    ("limits", "phases", "outcome", "counted"),
    [
        ({"count": 3}, "sss", CheckPhase.SUCCESSFUL, 3),
        ({"count": 3}, "ss", CheckPhase.RUNNING, 2),
        ({"count": 3}, "sfs", CheckPhase.FAILED, 2),
        ({"count": 3, "failure_limit": 1}, "sfs", CheckPhase.SUCCESSFUL, 3),
        ({"count": 5, "failure_limit": 1}, "sffss", CheckPhase.FAILED, 3),
        ({"count": 3}, "si", CheckPhase.INCONCLUSIVE, 2),
        ({"count": 3, "inconclusive_limit": 1}, "sis", CheckPhase.SUCCESSFUL, 3),
        # An Error uses up nothing: the measurement is taken again.
        ({"count": 9, "consecutive_error_limit": 2}, "eesees", CheckPhase.RUNNING, 2),
        ({"count": 2, "consecutive_error_limit": 2}, "eesees", CheckPhase.SUCCESSFUL, 2),
        ({"count": 2, "consecutive_error_limit": 4}, "se", CheckPhase.RUNNING, 1),
        # More Errors in a row than the limit hold the check; it never fails on them.
        ({"count": 9, "consecutive_error_limit": 2}, "eeseee", CheckPhase.MONITORING_UNAVAILABLE, 1),
        ({"count": 1, "consecutive_error_limit": 0}, "e", CheckPhase.MONITORING_UNAVAILABLE, 0),
        ({"count": 2, "consecutive_error_limit": 0}, "eeeeeeeeee", CheckPhase.MONITORING_UNAVAILABLE, 0),
        # The first answer lifts the hold and counting goes on where it was.
        ({"count": 3, "consecutive_error_limit": 1}, "seees", CheckPhase.RUNNING, 2),
        ({"count": 3, "consecutive_error_limit": 1}, "seeess", CheckPhase.SUCCESSFUL, 3),
        # Only a Failed measurement fails it, held or not.
        ({"count": 3, "consecutive_error_limit": 1}, "seeef", CheckPhase.FAILED, 2),
        ({"count": 3, "consecutive_error_limit": 1}, "eeei", CheckPhase.INCONCLUSIVE, 1),
    ],
)
def test_the_counting_rules(limits: dict[str, int], phases: str, outcome: CheckPhase, counted: int) -> None:
    state = outcomes(check(success_condition="result[0] == 0", **limits), phases)
    assert (state.outcome, state.counted) == (outcome, counted)


@pytest.mark.parametrize("phases", ["", "s", "ss", "e", "se", "eeee", "sfi", "eeefe", "ssseeee", "eiese"])
def test_errors_never_end_a_check(phases: str) -> None:
    """Whatever came before, Errors that follow neither fail, nor end, nor pass a check that was
    still measuring: its outcome stays what it was without them, or MonitoringUnavailable."""
    c = check(success_condition="result[0] == 0", count=9, failure_limit=3, inconclusive_limit=3)
    for errors in range(1, 8):
        state = outcomes(c, phases + "e" * errors)
        if outcomes(c, phases).outcome in ENDED:
            assert state.outcome is outcomes(c, phases).outcome
        else:
            assert state.outcome in (CheckPhase.RUNNING, CheckPhase.MONITORING_UNAVAILABLE), (phases, errors)
            assert state.counted == outcomes(c, phases).counted


def test_a_long_outage_keeps_the_limit_of_errors_with_the_latest_reason() -> None:
    c = check(success_condition="result[0] == 0", count=3, consecutive_error_limit=2)
    kept: list[Measurement] = [classify(c, [0.0])]
    for minute in range(1000):
        kept = recorded(c, kept, error(c, f"PrometheusUnavailable: down for {minute} min"))
    assert len(kept) == 1 + 3  # one answer and limit + 1 Errors
    state = judge(c, kept)
    assert (state.outcome, state.counted, state.errors_in_a_row) == (CheckPhase.MONITORING_UNAVAILABLE, 1, 3)
    assert state.last is not None
    assert state.last.message == "PrometheusUnavailable: down for 999 min"
    assert "MonitoringUnavailable (1/3, last Error no answer, 3 Error(s) in a row)" in state.describe()
    kept = recorded(c, kept, classify(c, [0.0]))
    assert (judge(c, kept).outcome, judge(c, kept).counted) == (CheckPhase.RUNNING, 2)
    kept = recorded(c, kept, error(c, "again"))
    assert len(kept) == 6  # an Error within the limit is kept, not replaced


def test_the_wait_on_prometheus_is_named_from_the_first_error() -> None:
    c = check(success_condition="result[0] == 0", count=3, consecutive_error_limit=1)
    down = [classify(c, [0.0]), error(c, "PrometheusUnavailable: read timed out")]
    first = unavailable(c, judge(c, down))
    assert first == (
        "xid MonitoringUnavailable (1 Error in a row, held after 2; 1/3 counted): "
        "PrometheusUnavailable: read timed out"
    )
    held = judge(c, [*down, error(c, "PrometheusUnavailable: again")])
    assert held.outcome is CheckPhase.MONITORING_UNAVAILABLE
    assert unavailable(c, held) == (
        "xid MonitoringUnavailable (held: 2 or more Errors in a row; 1/3 counted): "
        "PrometheusUnavailable: again"
    )
    assert unavailable(c, judge(c, [*down, classify(c, [0.0])])) is None  # an answer ends the wait
    assert unavailable(c, judge(c, [classify(c, [1.0])])) is None
    ended = check(success_condition="result[0] == 0", count=1)
    assert unavailable(ended, judge(ended, [classify(ended, [0.0])])) is None
    other = check(name="temp", success_condition="result[0] == 0", count=3)
    both = [judge(c, down), judge(other, [error(other, "QueryRejected: bad")]), judge(other, [])]
    assert unavailable_checks([c, other], both[:2]).count("MonitoringUnavailable (1 Error in a row") == 2
    assert unavailable_checks([c, other], [both[0], both[2]]) == first


def test_measurements_after_the_outcome_are_not_counted() -> None:
    state = outcomes(check(success_condition="result[0] == 0", count=5), "fsss")
    assert (state.outcome, state.measured, state.failed) == (CheckPhase.FAILED, 1, 1)


def test_a_gate_fails_before_it_waits_and_passes_only_when_every_check_passed() -> None:
    c = check(success_condition="result[0] == 0", count=2)
    passed, running = outcomes(c, "ss"), outcomes(c, "s")
    assert gate_outcome([passed, passed]) is CheckPhase.SUCCESSFUL
    assert gate_outcome([passed, running]) is CheckPhase.RUNNING
    assert gate_outcome([outcomes(c, "i"), outcomes(c, "f")]) is CheckPhase.FAILED
    assert gate_outcome([outcomes(c, "i"), running]) is CheckPhase.INCONCLUSIVE
    down = outcomes(check(success_condition="result[0] == 0", consecutive_error_limit=0), "e")
    assert gate_outcome([down, running, passed]) is CheckPhase.MONITORING_UNAVAILABLE
    assert gate_outcome([down, outcomes(c, "i")]) is CheckPhase.INCONCLUSIVE
    assert gate_outcome([down, outcomes(c, "f")]) is CheckPhase.FAILED


def test_the_state_describes_the_check_and_its_last_value() -> None:
    c = check(success_condition="result[0] == 0", count=3)
    state = judge(c, [classify(c, [0.0]), classify(c, [2.0])])
    assert state.describe() == "xid Failed (2/3, last Failed [2]): result[0] == 0 does not hold"
    assert "PrometheusUnavailable" in judge(c, [error(c, "PrometheusUnavailable: down")]).describe()


def test_prometheus_answers_are_parsed_in_label_order() -> None:
    vector = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"gpu": "1"}, "value": [1, "3"]},
                {"metric": {"gpu": "0"}, "value": [1, "NaN"]},
            ],
        },
    }
    parsed = parse_answer(vector)
    assert isinstance(parsed, list)
    assert parsed[1] == 3.0
    assert parsed[0] != parsed[0]
    assert parse_answer({"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}) == 2.0
    with pytest.raises(QueryRejectedError, match="parse error"):
        parse_answer({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"})
    with pytest.raises(QueryRejectedError, match="matrix result"):
        parse_answer({"status": "success", "data": {"resultType": "matrix", "result": []}})


def policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def test_admission_names_the_field_of_a_bad_check() -> None:
    bad = policy(
        {
            "healthChecks": [
                {"name": "xid", "query": "sum(x", "successCondition": "result[0] == 0"},
                {"name": "remap", "query": "up", "successCondition": "import os"},
            ],
        }
    )
    found = {issue.path: issue.message for issue in validate_deploymentpolicy(bad).errors}
    assert "unclosed" in found["spec.healthChecks[0].query"]
    assert "does not parse" in found["spec.healthChecks[1].successCondition"]


def test_admission_names_a_duplicate_and_an_unknown_check() -> None:
    bad = policy(
        {
            "healthChecks": [
                {"name": "remap", "query": "up", "successCondition": "result[0] == 0"},
                {"name": "xid", "query": "up", "successCondition": "result[0] == 0"},
                {"name": "remap", "query": "up", "failureCondition": "result[0] > 0"},
            ],
            "nodeGate": {"checks": ["xid", "pcie"]},
        }
    )
    found = {issue.path: issue.message for issue in validate_deploymentpolicy(bad).errors}
    assert "duplicate value 'remap'" in found["spec.healthChecks[2].name"]
    assert "unknown check 'pcie'" in found["spec.nodeGate.checks[1]"]


def test_a_good_gate_is_admitted() -> None:
    good = policy(
        {
            "healthChecks": [
                {"name": "xid", "query": "up", "successCondition": "result[0] == 0", "count": 3}
            ],
            "nodeGate": {"checks": ["xid"]},
        }
    )
    assert validate_deploymentpolicy(good).ok


def test_an_external_verdict_counts_only_after_the_update_began() -> None:
    by_condition = ExternalValidator(name="burn-in", condition_type="BurnInPassed", timeout_seconds=60)
    since = "2026-12-03T10:00:00+00:00"

    def facts(status: str, turned: str, annotations: dict[str, str] | None = None) -> NodeFacts:
        condition = {"BurnInPassed": NodeStatusCondition("BurnInPassed", status)}
        return NodeFacts("n", "u", "b", True, {}, annotations or {}, condition, {"BurnInPassed": turned})

    assert external_verdict(by_condition, facts("True", "2026-12-03T09:59:59Z"), since) is None
    # The API server keeps whole seconds: a turn in the second the update began counts.
    in_that_second = "2026-12-03T10:00:00.600000+00:00"
    assert external_verdict(by_condition, facts("True", "2026-12-03T10:00:00Z"), in_that_second) is not None
    passed = external_verdict(by_condition, facts("True", "2026-12-03T10:00:01Z"), since)
    assert passed is not None
    assert passed.passed
    failed = external_verdict(by_condition, facts("False", "2026-12-03T10:00:01Z"), since)
    assert failed is not None
    assert not failed.passed
    by_annotation = ExternalValidator(name="nvs", annotation="example.com/verdict", timeout_seconds=60)
    assert external_verdict(by_annotation, facts("True", ""), since) is None
    other = external_verdict(by_annotation, facts("True", "", {"example.com/verdict": "failed"}), since)
    assert other is not None
    assert (other.passed, other.message) == (False, "annotation example.com/verdict=failed")


def test_an_external_validator_names_one_source_and_a_gate_needs_something() -> None:
    both = {"name": "x", "conditionType": "A", "annotation": "b", "timeoutSeconds": 60}
    bad = policy({"nodeGate": {"external": [both]}})
    found = {issue.path: issue.message for issue in validate_deploymentpolicy(bad).errors}
    assert "exactly one of conditionType or annotation" in found["spec.nodeGate.external[0]"]
    result = validate_deploymentpolicy(policy({"nodeGate": {}}))
    empty = {issue.path: issue.message for issue in result.errors}
    assert "at least one check, external validator or validation" in empty["spec.nodeGate"]


def test_the_nodes_placeholder_is_a_regex_alternation_for_a_double_quoted_string() -> None:
    assert nodes_alternation(["gpu-node-0001", "n1.example.com"]) == "gpu-node-0001|n1\\\\.example\\\\.com"


def test_admission_names_an_unknown_soak_check() -> None:
    bad = policy(
        {
            "healthChecks": [{"name": "xid", "query": "up", "successCondition": "result[0] == 0"}],
            "steps": [{"name": "watch", "soak": {"durationSeconds": 60, "checks": ["xid", "nccl"]}}],
            "compartments": [
                {
                    "name": "gb200",
                    "selector": {"matchLabels": {"a": "b"}},
                    "steps": [{"soak": {"durationSeconds": 60, "checks": ["pcie"]}}, {"batches": {}}],
                }
            ],
        }
    )
    found = {issue.path: issue.message for issue in validate_deploymentpolicy(bad).errors}
    assert "unknown check 'nccl'" in found["spec.steps[0].soak.checks[1]"]
    assert "unknown check 'pcie'" in found["spec.compartments[0].steps[0].soak.checks[0]"]
    assert "spec.steps[0].soak.checks[0]" not in found


def test_admission_names_an_unknown_background_check_of_a_batches_step() -> None:
    bad = policy(
        {
            "healthChecks": [{"name": "xid", "query": "up", "successCondition": "result[0] == 0"}],
            "steps": [{"name": "rest", "batches": {"checks": ["xid", "nccl"]}}],
            "compartments": [
                {
                    "name": "gb200",
                    "selector": {"matchLabels": {"a": "b"}},
                    "steps": [{"batches": {"checks": ["pcie"]}}],
                }
            ],
        }
    )
    found = {issue.path: issue.message for issue in validate_deploymentpolicy(bad).errors}
    assert "unknown check 'nccl'" in found["spec.steps[0].batches.checks[1]"]
    assert "unknown check 'pcie'" in found["spec.compartments[0].steps[0].batches.checks[0]"]
    assert "spec.steps[0].batches.checks[0]" not in found
