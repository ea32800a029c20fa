"""The condition language's bounds: every construct that could allocate or loop without end is
refused at admission naming the field and the rule, a result over MAX_RESULT values is an Error
measurement never evaluated, and every admitted condition (random ones from the grammar) evaluates
within MAX_STEPS over the largest result: a counting reference interpreter checks both the answer
and that the bound computed from the tree holds."""

from __future__ import annotations

import ast
import builtins
import operator
import random
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.api import healthcondition as hc
from fleetwright.api.gpuchecks import dcgm_checks
from fleetwright.api.health import MetricCheck
from fleetwright.api.healthcondition import (
    MAX_CONDITION,
    MAX_NODES,
    MAX_RESULT,
    MAX_STEPS,
    CompiledCondition,
    ConditionError,
    compile_condition,
    evaluate,
)
from fleetwright.api.validation import validate_deploymentpolicy
from fleetwright.planner.health.analysis import CheckPhase, classify
from tests.support.conditions import condition, values

pytestmark = pytest.mark.unit

HOSTILE = [
    ("len([0]*100000000) > 0", "repeating a sequence"),
    ("len(100000000*[0]) > 0", "repeating a sequence"),
    ("len((r for r in result) * 9) > 0", "repeating a sequence"),
    ("len('x' * 100000000) > 0", "repeating a sequence"),
    ("len([0]) > 0", "a list literal is not allowed"),
    ("result[0] in (1, 2)", "a tuple is not allowed"),
    ("result[0] in {1, 2}", "a set literal is not allowed"),
    ("len({1: 2}) > 0", "a dict literal is not allowed"),
    ("len([r for r in result]) > 0", "a list comprehension is not allowed"),
    ("len({r for r in result}) > 0", "a set comprehension is not allowed"),
    ("len({r: r for r in result}) > 0", "a dict comprehension is not allowed"),
    ("len(*result) > 0", "Starred is not allowed"),
    ("all(all(a <= b for b in result) for a in result)", "over the budget of"),
    ("any(r in result for r in result)", "over the budget of"),
    ("len(result * 100000000) > 0", "len() takes a list, but result * 100000000 is a number"),
    ("sum(result, result) > 0", "sum() takes one argument"),
    ("max(result, len(result)) > 0", "max() of values takes numbers, but result is a list"),
    ("(r for r in result)[0] > 0", "only result can be indexed"),
    ("result[99999] > 0", f"a whole number under {MAX_RESULT}"),
    ("result[0] < 1e999", "constant inf is not a number"),
    ("result[0] < " + "9" * 400, "too large"),
    ("all(all > 0 for all in result)", "cannot be named 'all'"),
    ("result[0] if result else 0", "IfExp is not allowed"),
    ("result[0] " + "+ result[0] " * 30 + "> 0", f"over the limit of {MAX_NODES}"),
    ("not " * 70 + "True", f"over the limit of {MAX_NODES}"),
    ("0 < " * 130 + "1", f"over the limit of {MAX_CONDITION}"),
    ("result < 1 and result[0] == 0", "for a list result"),
]


def policy_with(field: str, text: str) -> dict[str, Any]:
    check = {"name": "xid", "query": "up", field: text}
    return {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": {"healthChecks": [check], "nodeGate": {"checks": ["xid"]}},
    }


@pytest.mark.parametrize(("text", "rule"), HOSTILE, ids=[text[:40] for text, _ in HOSTILE])
def test_a_hostile_condition_is_refused_at_admission_naming_the_field_and_rule(text: str, rule: str) -> None:
    with pytest.raises(ConditionError, match=_literal(rule)):
        compile_condition(text)
    for field in ("successCondition", "failureCondition"):
        found = {i.path: i.message for i in validate_deploymentpolicy(policy_with(field, text)).errors}
        path = f"spec.healthChecks[0].{field}"
        assert path in found, found
        if len(text) <= MAX_CONDITION:  # else the field's maxLength names it first
            assert rule in found[path], found[path]


def _literal(text: str) -> str:
    return "".join(f"[{c}]" if c in "()[]{}*+.?^$|\\" else c for c in text)


def test_the_shipped_dcgm_checks_are_far_inside_every_limit_and_fit_a_2000_gpu_fleet_gate() -> None:
    for check in dcgm_checks():
        for text in (check.success_condition, check.failure_condition):
            assert text is not None
            compiled = compile_condition(text)
            assert len(text) * 8 < MAX_CONDITION
            assert sum(isinstance(n, ast.expr) for n in ast.walk(compiled.tree)) * 4 < MAX_NODES
            assert compiled.steps_on([0.0] * MAX_RESULT) < MAX_STEPS
            assert evaluate(compiled, [0.0] * 2000) is (text.startswith("all"))
    assert MAX_RESULT >= 250 * 8


def measured(result: list[float], text: str = "all(r == 0 for r in result)") -> Any:
    return classify(MetricCheck(name="xid", query="up", success_condition=text), result)


def test_a_result_over_the_limit_is_an_error_naming_the_limit_and_the_count_and_is_not_kept() -> None:
    over = measured([0.0] * (MAX_RESULT + 1))
    assert over.phase is CheckPhase.ERROR
    assert f"{MAX_RESULT + 1} values, over the limit of {MAX_RESULT}" in over.message
    assert over.value is None
    assert measured([0.0] * MAX_RESULT).phase is CheckPhase.SUCCESSFUL
    with pytest.raises(ConditionError, match=f"over the limit of {MAX_RESULT}"):
        evaluate(compile_condition("len(result) > 0"), [0.0] * (MAX_RESULT + 1))


def test_a_condition_for_a_number_never_multiplies_a_list_result() -> None:
    compiled = compile_condition("result * 100000000 > 0")
    assert evaluate(compiled, 2.0) is True
    with pytest.raises(ConditionError, match=r"arithmetic takes numbers, but result is a list.*gave a list"):
        evaluate(compiled, [1.0])
    assert measured([1.0], "result * 100000000 > 0").phase is CheckPhase.ERROR


def test_generators_count_and_whole_numbers_stay_small() -> None:
    assert evaluate(compile_condition("len(r for r in result if r > 0) == 1"), [0.0, 3.0])
    assert evaluate(compile_condition("sum(r > 0 for r in result) == 1"), [0.0, 3.0])
    # Whole-number constants are floats: a product of large ones stays one float, never a bignum.
    big = " * ".join(["1" + "0" * 99] * 3)
    assert evaluate(compile_condition(f"result[0] < {big}"), [1.0])


# ----- every admitted condition within the budget -----------------------------------------------
class Counter:
    """A reference interpreter of the language counting the steps healthcondition bounds: one per
    node evaluated (a call CALL_STEPS, min/max of several values VALUES_CALL_STEPS, an index 2),
    GENERATOR_STEPS per value a generator makes,
    and per value walked 1 (all any len sum) or COMPARING_STEPS (min max in)."""

    def __init__(self, result: list[float]) -> None:
        self.result = result
        self.steps = 0

    def run(self, tree: ast.Expression) -> Any:
        return self.eval(tree.body, {"result": self.result})

    def eval(self, node: Any, scope: dict[str, Any]) -> Any:
        self.steps += 1
        if isinstance(node, ast.Constant):
            return float(node.value) if type(node.value) is int else node.value
        if isinstance(node, ast.Name):
            return scope[node.id]
        if isinstance(node, ast.BoolOp):
            want = isinstance(node.op, ast.Or)
            return want if any(self.eval(v, scope) is want for v in node.values) else not want
        if isinstance(node, ast.UnaryOp):
            value = self.eval(node.operand, scope)
            if isinstance(node.op, ast.Not):
                return not value
            return -value if isinstance(node.op, ast.USub) else +value
        if isinstance(node, ast.BinOp):
            left, right = self.eval(node.left, scope), self.eval(node.right, scope)
            return BINARY[type(node.op)](left, right)
        if isinstance(node, ast.Compare):
            return self.compare(node, scope)
        if isinstance(node, ast.Subscript):
            self.steps += 1
            return self.eval(node.value, scope)[ast.literal_eval(node.slice)]
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        return self.generate(node, scope)

    def compare(self, node: ast.Compare, scope: dict[str, Any]) -> bool:
        left = self.eval(node.left, scope)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node, scope)
            if isinstance(op, ast.In | ast.NotIn):
                found = any(self.walked(right, hc.COMPARING_STEPS, partial(operator.eq, left)))
                holds = found if isinstance(op, ast.In) else not found
            else:
                holds = COMPARE[type(op)](left, right)
            if not holds:
                return False
            left = right
        return True

    def call(self, node: ast.Call, scope: dict[str, Any]) -> Any:
        name = node.func.id  # type: ignore[attr-defined]
        several = name in ("min", "max") and len(node.args) > 1
        self.steps += (hc.VALUES_CALL_STEPS if several else hc.CALL_STEPS) - 1
        args = [self.eval(a, scope) for a in node.args]
        function: Callable[..., Any] = {"len": lambda v: len(list(v))}.get(name, getattr(builtins, name))
        if name == "abs" or len(args) > 1:
            return function(*args)
        weight = hc.COMPARING_STEPS if name in ("min", "max") else 1
        return function(self.walked(args[0], weight, lambda v: v))

    def walked(self, values: Any, weight: int, each: Callable[[Any], Any]) -> Iterator[Any]:
        for value in values:
            self.steps += weight
            yield each(value)

    def generate(self, node: ast.GeneratorExp, scope: dict[str, Any]) -> Iterator[Any]:
        generator = node.generators[0]
        for value in self.eval(generator.iter, scope):
            self.steps += hc.GENERATOR_STEPS
            inner = {**scope, generator.target.id: value}  # type: ignore[attr-defined]
            if all(self.eval(test, inner) for test in generator.ifs):
                yield self.eval(node.elt, inner)


BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Mod: lambda a, b: a % b,
}
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


def reference(compiled: CompiledCondition, result: list[float]) -> tuple[Any, int]:
    """The reference interpreter's answer (or the exception's type) and its steps."""
    counter = Counter(result)
    try:
        answer: Any = counter.run(compiled.tree)
    except (IndexError, ValueError, ZeroDivisionError, OverflowError) as error:
        answer = type(error)
    return answer, counter.steps


def compiled_answer(compiled: CompiledCondition, result: list[float]) -> Any:
    try:
        return evaluate(compiled, result)
    except ConditionError as error:
        return str(error)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
def test_every_admitted_condition_evaluates_within_the_budget_on_the_largest_result(seed: int) -> None:
    rng = random.Random(seed)
    text = condition(rng)
    try:
        compiled = compile_condition(text)
    except ConditionError:
        return  # refused at admission: never evaluated (the hostile corpus checks the reasons)
    result = values(rng, MAX_RESULT)
    answer, steps = reference(compiled, result)
    bound = compiled.steps_on(result)
    assert steps <= bound <= MAX_STEPS, (text, steps, bound)
    got = compiled_answer(compiled, result)
    if isinstance(answer, bool):
        assert got is answer, text
    else:
        assert isinstance(got, str), (text, answer, got)
        assert "budget" not in got


def test_the_grammar_admits_most_kinds_of_condition() -> None:
    """So the property above tests admitted conditions, not only refusals."""
    rng = random.Random(3)
    admitted = []
    for _ in range(300):
        text = condition(rng)
        try:
            admitted.append(compile_condition(text))
        except ConditionError:
            continue
    assert len(admitted) > 100
    shown = " ".join(c.text for c in admitted)
    for construct in (" for ", " in result", "all(", "any(", "len(", "min(", "max(", "sum(", "abs(", " % "):
        assert construct in shown, construct
