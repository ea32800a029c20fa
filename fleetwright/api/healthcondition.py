"""The condition language of metric checks: a small, safe expression over a query's ``result``.

``result`` is the list of the query's sample values (one per series, ordered by their labels) or,
for a scalar query, the one value. A condition is a Python-syntax expression that only uses
comparisons, ``and``/``or``/``not``, arithmetic (``+ - * / %``), constants, indexing with a
constant (``result[0]``), the functions ``all any len min max sum abs`` and generator expressions
over a list (``all(r < 5 for r in result)``). It is parsed with ``ast`` and checked against that
whitelist at admission (``compile_condition``), then evaluated by walking the tree
(``evaluate``): never ``eval``, no attribute access, no names but ``result`` and the generator's
own variable. Owns that language; pure, no I/O.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable
from typing import Any

MAX_CONDITION = 512
RESULT = "result"

_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "all": all,
    "any": any,
    "len": len,
    "min": min,
    "max": max,
    "sum": sum,
    "abs": abs,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}


class ConditionError(ValueError):
    """A condition that does not parse, uses something outside the language, or fails on a result."""


def compile_condition(text: str) -> ast.Expression:
    """The checked tree of ``text``; ConditionError naming what is not allowed."""
    if len(text) > MAX_CONDITION:
        raise ConditionError(f"longer than {MAX_CONDITION} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ConditionError(f"does not parse: {error.msg} (column {error.offset})") from None
    _check(tree.body, frozenset({RESULT}))
    return tree


def check_condition(text: str) -> str:
    """A pydantic validator: ``text`` if it compiles."""
    try:
        compile_condition(text)
    except ConditionError as error:
        raise ValueError(f"condition {text!r}: {error}") from None
    return text


def evaluate(tree: ast.Expression, result: float | list[float]) -> bool:
    """Whether the condition holds for ``result``; ConditionError when it cannot be evaluated on it
    (an index out of range, a comparison of a list with a number...)."""
    try:
        value = _eval(tree.body, {RESULT: result})
    except ConditionError:
        raise
    except (TypeError, IndexError, ValueError, ZeroDivisionError, OverflowError) as error:
        raise ConditionError(f"cannot be evaluated on result {result!r}: {error}") from None
    if not isinstance(value, bool):
        raise ConditionError(f"gives {value!r} on result {result!r}, not true or false")
    return value


# ----- the whitelist ----------------------------------------------------------------------------
def _check(node: ast.AST, names: frozenset[str]) -> None:
    checker = _CHECKS.get(type(node))
    if checker is None:
        raise ConditionError(f"{type(node).__name__} is not allowed in a condition")
    checker(node, names)


def _check_all(nodes: Iterable[ast.AST], names: frozenset[str]) -> None:
    for node in nodes:
        _check(node, names)


def _check_constant(node: Any, names: frozenset[str]) -> None:
    value = node.value
    if isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(value)):
        return
    raise ConditionError(f"constant {value!r} is not a number or a boolean")


def _check_name(node: Any, names: frozenset[str]) -> None:
    if node.id not in names:
        raise ConditionError(f"unknown name {node.id!r} (only {RESULT!r} and a generator's variable)")


def _check_unary(node: Any, names: frozenset[str]) -> None:
    if not isinstance(node.op, ast.Not | ast.USub | ast.UAdd):
        raise ConditionError(f"operator {type(node.op).__name__} is not allowed")
    _check(node.operand, names)


def _check_binary(node: Any, names: frozenset[str]) -> None:
    if type(node.op) not in _BINARY:
        raise ConditionError(f"operator {type(node.op).__name__} is not allowed")
    _check_all((node.left, node.right), names)


def _check_compare(node: Any, names: frozenset[str]) -> None:
    for op in node.ops:
        if type(op) not in _COMPARE:
            raise ConditionError(f"comparison {type(op).__name__} is not allowed")
    _check_all((node.left, *node.comparators), names)


def _check_subscript(node: Any, names: frozenset[str]) -> None:
    index = node.slice
    negative = isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub)
    inner = index.operand if negative else index
    if not (isinstance(inner, ast.Constant) and type(inner.value) is int):
        raise ConditionError("an index must be a whole number: result[0], result[-1]")
    _check(node.value, names)


def _check_call(node: Any, names: frozenset[str]) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
        raise ConditionError(f"only the functions {', '.join(_FUNCTIONS)} may be called")
    _check_all(node.args, names)


def _check_generator(node: Any, names: frozenset[str]) -> None:
    generator = node.generators[0]
    if len(node.generators) != 1 or not isinstance(generator.target, ast.Name) or generator.is_async:
        raise ConditionError("a generator takes one plain variable: (r < 5 for r in result)")
    _check(generator.iter, names)
    inner = names | {generator.target.id}
    _check_all((node.elt, *generator.ifs), inner)


_CHECKS: dict[type[ast.AST], Callable[[Any, frozenset[str]], None]] = {
    ast.Constant: _check_constant,
    ast.Name: _check_name,
    ast.BoolOp: lambda node, names: _check_all(node.values, names),
    ast.UnaryOp: _check_unary,
    ast.BinOp: _check_binary,
    ast.Compare: _check_compare,
    ast.Subscript: _check_subscript,
    ast.Call: _check_call,
    ast.GeneratorExp: _check_generator,
    ast.List: lambda node, names: _check_all(node.elts, names),
    ast.Tuple: lambda node, names: _check_all(node.elts, names),
}


# ----- evaluation -------------------------------------------------------------------------------
Scope = dict[str, Any]


def _eval(node: ast.AST, scope: Scope) -> Any:
    return _EVALS[type(node)](node, scope)


def _truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConditionError(f"{value!r} is not true or false")
    return value


def _eval_bool(node: Any, scope: Scope) -> bool:
    values = (_truth(_eval(v, scope)) for v in node.values)
    return all(values) if isinstance(node.op, ast.And) else any(values)


def _eval_unary(node: Any, scope: Scope) -> Any:
    operand = _eval(node.operand, scope)
    if isinstance(node.op, ast.Not):
        return not _truth(operand)
    return -operand if isinstance(node.op, ast.USub) else +operand


def _eval_compare(node: Any, scope: Scope) -> bool:
    left = _eval(node.left, scope)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _eval(right_node, scope)
        if isinstance(left, list) != isinstance(right, list) and type(op) not in (ast.In, ast.NotIn):
            raise ConditionError(f"compares a list with a number ({left!r}, {right!r}); use result[0]")
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _eval_generator(node: Any, scope: Scope) -> list[Any]:
    generator = node.generators[0]
    items = []
    for item in _eval(generator.iter, scope):
        inner = {**scope, generator.target.id: item}
        if all(_truth(_eval(test, inner)) for test in generator.ifs):
            items.append(_eval(node.elt, inner))
    return items


_EVALS: dict[type[ast.AST], Callable[[Any, Scope], Any]] = {
    ast.Constant: lambda node, scope: node.value,
    ast.Name: lambda node, scope: scope[node.id],
    ast.BoolOp: _eval_bool,
    ast.UnaryOp: _eval_unary,
    ast.BinOp: lambda node, scope: _BINARY[type(node.op)](_eval(node.left, scope), _eval(node.right, scope)),
    ast.Compare: _eval_compare,
    ast.Subscript: lambda node, scope: _eval(node.value, scope)[_eval(node.slice, scope)],
    ast.Call: lambda node, scope: _FUNCTIONS[node.func.id](*(_eval(a, scope) for a in node.args)),
    ast.GeneratorExp: _eval_generator,
    ast.List: lambda node, scope: [_eval(e, scope) for e in node.elts],
    ast.Tuple: lambda node, scope: [_eval(e, scope) for e in node.elts],
}
