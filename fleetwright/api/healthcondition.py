"""The condition language of metric checks: a small, bounded expression over a query's ``result``.

``result`` is the list of the query's sample values (one per series, ordered by their labels) or,
for a scalar query, the one value. A condition is a Python-syntax expression that only uses
comparisons, ``and``/``or``/``not``, arithmetic (``+ - * / %``), number and boolean constants,
indexing ``result`` with a constant (``result[0]``), the functions ``all any len min max sum abs``
and one-variable generator expressions (``all(r < 5 for r in result)``). ``result`` is the only
list: no list, tuple, set or dict literal, no comprehension but a generator, no repetition.

``compile_condition`` (admission, and the worker before the first use) checks the text against
that grammar, infers the kind of every sub-expression for a list ``result`` and for a number
``result`` (arithmetic and ordering take numbers, ``and``/``or``/``not`` take true or false, a
generator walks a list), and bounds its work: at most ``MAX_CONDITION`` characters and
``MAX_NODES`` expression nodes, and at most ``MAX_STEPS`` steps on a result of ``MAX_RESULT``
values. Steps count an upper bound of the work, computed from the tree as a polynomial in the
result's length: one per expression node evaluated (a call ``CALL_STEPS``, ``min``/``max`` of
several values ``VALUES_CALL_STEPS``), ``GENERATOR_STEPS``
per value a generator makes, and per value walked 1 (``all any len sum``) or ``COMPARING_STEPS``
(``min max in``). ``evaluate`` refuses a result longer than ``MAX_RESULT`` or of a kind the
condition does not take, then runs the checked tree compiled by Python, with no builtins but the
whitelisted functions: never the text. (A tree-walking interpreter took ten times longer, 7 ms for
a dcgm check over 4,096 values: over the budget a worker thread can spend.) Owns that language;
pure, no I/O.
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import CodeType
from typing import Any

MAX_CONDITION = 512
"""Characters in a condition (the CRD's maxLength); a dcgm check's is about 30."""
MAX_NODES = 64
"""Expression nodes in a condition; a dcgm check has 8, ``len(result) == 8 and all(...)`` 14."""
MAX_RESULT = 4096
"""Values in ``result`` (series a query answers): a ``{{nodes}}`` fleet gate over 512 nodes of
8 GPUs. A longer answer is an Error measurement, never evaluated."""
MAX_STEPS = 64_000
"""Steps one evaluation may take: about 15 per value of the largest result, so two generators like
``all(r == 0 for r in result)`` (6 per value) fit; a step takes 4 to 8 ns (bench/conditions.py)."""
CALL_STEPS = 2
"""Steps a function call counts, beside its arguments' and the values it walks."""
VALUES_CALL_STEPS = 8
"""Steps ``min``/``max`` of several values count: that call takes about 8 comparisons' time."""
GENERATOR_STEPS = 2
"""Steps a generator counts per value, beside its expression's."""
COMPARING_STEPS = 3
"""Steps ``min``, ``max`` and ``in`` count per value they compare (``all any len sum``: 1)."""
RESULT = "result"


class ConditionError(ValueError):
    """A condition that does not parse, uses something outside the language, or fails on a result."""


class Kind(StrEnum):
    """What an expression gives."""

    NUMBER = "a number"
    BOOLEAN = "true or false"
    NUMBERS = "a list of numbers"
    BOOLEANS = "a list of true or false"


_ELEMENT = {Kind.NUMBERS: Kind.NUMBER, Kind.BOOLEANS: Kind.BOOLEAN}
_LIST = {Kind.NUMBER: Kind.NUMBERS, Kind.BOOLEAN: Kind.BOOLEANS}
Steps = tuple[int, ...]
"""A step count as a polynomial in the result's length: coefficients from the constant up."""


def _count(values: Iterable[Any]) -> int:
    """``len`` that also counts a generator's values."""
    return len(values if isinstance(values, list) else list(values))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "all": all,
    "any": any,
    "len": _count,
    "min": min,
    "max": max,
    "sum": sum,
    "abs": abs,
}
_ONE_LIST = frozenset({"all", "any", "len", "sum"})
"""Functions of one list; ``min``/``max`` take one list or several numbers, ``abs`` one number."""
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod)
_COMPARISONS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.In, ast.NotIn)
_SEQUENCE_NAMES: dict[type[ast.AST], str] = {
    ast.List: "a list literal",
    ast.Tuple: "a tuple",
    ast.Set: "a set literal",
    ast.Dict: "a dict literal",
    ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension",
}
_SEQUENCES = (*_SEQUENCE_NAMES, ast.GeneratorExp)
_GLUE: tuple[type[ast.AST], ...] = (ast.Expression, ast.Load, ast.Store, ast.comprehension, ast.And, ast.Or)
_GLUE += (ast.Not, ast.USub, ast.UAdd, *_OPERATORS, *_COMPARISONS)


@dataclass(frozen=True)
class CompiledCondition:
    """A checked condition: its tree, Python's code for it, and per kind of ``result`` it takes
    (a number or a list of numbers) its step count; ``refused`` says why it takes no other."""

    text: str
    tree: ast.Expression
    code: CodeType
    steps: dict[Kind, Steps]
    refused: dict[Kind, str]

    def steps_on(self, result: float | list[float]) -> int:
        """The most steps it takes on ``result``; ConditionError if it does not take that kind."""
        kind = Kind.NUMBERS if isinstance(result, list) else Kind.NUMBER
        if kind in self.refused:
            what = "a list" if kind is Kind.NUMBERS else "a number"
            raise ConditionError(f"{self.refused[kind]} (the query gave {what})")
        return _at(self.steps[kind], len(result) if isinstance(result, list) else 0)


def compile_condition(text: str) -> CompiledCondition:
    """The checked condition ``text``; ConditionError naming the first rule it breaks."""
    if len(text) > MAX_CONDITION:
        raise ConditionError(f"has {len(text)} characters, over the limit of {MAX_CONDITION}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ConditionError(f"does not parse: {error.msg} (column {error.offset})") from None
    nodes = sum(isinstance(node, ast.expr) for node in ast.walk(tree))
    if nodes > MAX_NODES:
        raise ConditionError(f"has {nodes} expression nodes, over the limit of {MAX_NODES}")
    for node in ast.walk(tree):
        _check_node(node)
    _check_names(tree.body, frozenset({RESULT}))
    steps, refused = _kinds(tree)
    checked = ast.fix_missing_locations(_Floats().visit(copy.deepcopy(tree)))
    code = compile(checked, "<condition>", "eval", dont_inherit=True)
    return CompiledCondition(text, tree, code, steps, refused)


def check_condition(text: str) -> str:
    """A pydantic validator: ``text`` if it compiles."""
    try:
        compile_condition(text)
    except ConditionError as error:
        raise ValueError(f"condition {text!r}: {error}") from None
    return text


def oversized(result: float | list[float]) -> str | None:
    """Why ``result`` is too long to evaluate a condition on, or None."""
    if isinstance(result, list) and len(result) > MAX_RESULT:
        return f"the query gave {len(result)} values, over the limit of {MAX_RESULT} a condition takes"
    return None


def evaluate(condition: CompiledCondition, result: float | list[float]) -> bool:
    """Whether the condition holds for ``result``; ConditionError when it cannot be evaluated on it
    (too long, a kind it does not take, an index out of range...)."""
    too_long = oversized(result)
    if too_long is not None:
        raise ConditionError(too_long)
    steps = condition.steps_on(result)
    if steps > MAX_STEPS:  # only a result longer than MAX_RESULT could, refused above
        raise ConditionError(f"needs {steps} steps, over the budget of {MAX_STEPS}")
    scope: dict[str, Any] = {**_FUNCTIONS, "__builtins__": {}, RESULT: result}
    try:
        # The checked tree (no attribute, no name but result, the generators' variables and the
        # functions above, number constants), with no builtins: never the text.
        value = eval(condition.code, scope)  # noqa: S307
    except (TypeError, IndexError, ValueError, ZeroDivisionError, OverflowError) as error:
        raise ConditionError(f"cannot be evaluated on result {_brief(result)}: {error}") from None
    if not isinstance(value, bool):  # the kinds make it one; a guard, not a rule
        raise ConditionError(f"gives {value!r} on result {_brief(result)}, not true or false")
    return value


def _brief(result: float | list[float]) -> str:
    if not isinstance(result, list) or len(result) <= 4:
        return repr(result)
    return f"[{', '.join(repr(v) for v in result[:4])}, … {len(result)} values]"


# ----- the grammar ------------------------------------------------------------------------------
def _check_node(node: ast.AST) -> None:
    """The rules one node must follow by itself."""
    if isinstance(node, _GLUE):
        return
    check = _NODE_RULES.get(type(node))
    if check is not None:
        check(node)
    elif type(node) in _SEQUENCE_NAMES:
        raise ConditionError(f"{_SEQUENCE_NAMES[type(node)]} is not allowed: result is the only list")
    elif isinstance(node, ast.operator | ast.unaryop | ast.cmpop):
        raise ConditionError(f"operator {type(node).__name__} is not allowed")
    else:
        raise ConditionError(f"{type(node).__name__} is not allowed in a condition")


def _check_constant(node: Any) -> None:
    value = node.value
    if isinstance(value, bool):
        return
    if not isinstance(value, int | float) or (isinstance(value, float) and not math.isfinite(value)):
        raise ConditionError(f"constant {value!r} is not a number or a boolean")
    if abs(value) > 1e300:  # an int compares with a float exactly, never overflowing
        raise ConditionError(f"constant {str(value)[:20]}… is too large (at most 1e300)")


def _check_binary(node: Any) -> None:
    if isinstance(node.op, ast.Mult) and any(_is_sequence(side) for side in (node.left, node.right)):
        raise ConditionError("repeating a sequence (a list or string times a number) is not allowed")
    if not isinstance(node.op, _OPERATORS):
        raise ConditionError(f"operator {type(node.op).__name__} is not allowed")


def _is_sequence(node: ast.AST) -> bool:
    return isinstance(node, _SEQUENCES) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _check_subscript(node: Any) -> None:
    if not (isinstance(node.value, ast.Name) and node.value.id == RESULT):
        raise ConditionError(f"only {RESULT} can be indexed: {RESULT}[0], {RESULT}[-1]")
    index = node.slice
    inner = index.operand if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) else index
    if not (isinstance(inner, ast.Constant) and type(inner.value) is int and inner.value < MAX_RESULT):
        raise ConditionError(f"an index must be a whole number under {MAX_RESULT}: result[0], result[-1]")


def _check_call(node: Any) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
        raise ConditionError(f"only the functions {', '.join(_FUNCTIONS)} may be called, without keywords")
    name, count = node.func.id, len(node.args)
    if (name in _ONE_LIST or name == "abs") and count != 1:
        raise ConditionError(f"{name}() takes one argument, not {count}")
    if count == 0:
        raise ConditionError(f"{name}() takes a list or numbers")


def _check_generator(node: Any) -> None:
    generator = node.generators[0]
    if len(node.generators) != 1 or not isinstance(generator.target, ast.Name) or generator.is_async:
        raise ConditionError("a generator takes one plain variable: (r < 5 for r in result)")
    name = generator.target.id
    if name == RESULT or name in _FUNCTIONS or name.startswith("_"):
        raise ConditionError(f"a generator's variable cannot be named {name!r}")


_NODE_RULES: dict[type[ast.AST], Callable[[Any], None]] = {
    ast.Constant: _check_constant,
    ast.Name: lambda node: None,
    ast.BoolOp: lambda node: None,
    ast.UnaryOp: lambda node: None,
    ast.Compare: lambda node: None,
    ast.BinOp: _check_binary,
    ast.Subscript: _check_subscript,
    ast.Call: _check_call,
    ast.GeneratorExp: _check_generator,
}


def _check_names(node: ast.AST, names: frozenset[str]) -> None:
    """Every name read is ``result`` or a variable of a generator around it."""
    if isinstance(node, ast.Name) and node.id not in names:
        raise ConditionError(f"unknown name {node.id!r} (only {RESULT!r} and a generator's variable)")
    if isinstance(node, ast.GeneratorExp):
        generator = node.generators[0]
        _check_names(generator.iter, names)
        inner = names | {ast.unparse(generator.target)}
        for part in (node.elt, *generator.ifs):
            _check_names(part, inner)
        return
    children = node.args if isinstance(node, ast.Call) else ast.iter_child_nodes(node)
    for child in children:
        _check_names(child, names)


# ----- kinds and steps --------------------------------------------------------------------------
def _kinds(tree: ast.Expression) -> tuple[dict[Kind, Steps], dict[Kind, str]]:
    """The steps per kind of result the condition takes, and why it takes no other; ConditionError
    if it takes neither or needs more than MAX_STEPS on the largest result."""
    steps: dict[Kind, Steps] = {}
    refused: dict[Kind, str] = {}
    for kind in (Kind.NUMBERS, Kind.NUMBER):
        try:
            steps[kind] = _typed_condition(tree.body, kind)
        except _KindError as error:
            refused[kind] = str(error)
    if not steps:
        on_list, on_number = refused[Kind.NUMBERS], refused[Kind.NUMBER]
        if on_list == on_number:
            raise ConditionError(on_list)
        raise ConditionError(f"{on_list} for a list result; {on_number} for a number result")
    if Kind.NUMBERS in steps and (worst := _at(steps[Kind.NUMBERS], MAX_RESULT)) > MAX_STEPS:
        raise ConditionError(
            f"needs up to {worst} steps on a result of {MAX_RESULT} values, over the budget of "
            f"{MAX_STEPS} (a generator within a generator walks the result once per value)"
        )
    return steps, refused


class _KindError(ConditionError):
    """The condition does not take this kind of result."""


def _typed_condition(node: ast.expr, result: Kind) -> Steps:
    kind, steps = _typed(node, {RESULT: result})
    if kind is not Kind.BOOLEAN:
        raise _KindError(f"gives {kind}, not true or false: compare it (... > 0)")
    return steps


Scope = dict[str, Kind]
Typed = tuple[Kind, Steps]


def _typed(node: ast.expr, scope: Scope) -> Typed:
    return _TYPING[type(node)](node, scope)


def _scalar(node: ast.expr, scope: Scope, why: str) -> Typed:
    kind, steps = _typed(node, scope)
    if kind not in _LIST:
        raise _KindError(f"{why}, but {ast.unparse(node)} is {kind}: use its values (result[0], a generator)")
    return kind, steps


def _listed(node: ast.expr, scope: Scope, why: str) -> Typed:
    kind, steps = _typed(node, scope)
    if kind not in _ELEMENT:
        raise _KindError(f"{why}, but {ast.unparse(node)} is {kind}")
    return kind, steps


def _boolean(node: ast.expr, scope: Scope, why: str) -> Steps:
    kind, steps = _typed(node, scope)
    if kind is not Kind.BOOLEAN:
        raise _KindError(f"{why}, but {ast.unparse(node)} is {kind}")
    return steps


def _typed_bool(node: Any, scope: Scope) -> Typed:
    why = f"{'and' if isinstance(node.op, ast.And) else 'or'} takes true or false"
    return Kind.BOOLEAN, _plus((1,), *(_boolean(value, scope, why) for value in node.values))


def _typed_unary(node: Any, scope: Scope) -> Typed:
    if isinstance(node.op, ast.Not):
        return Kind.BOOLEAN, _plus((1,), _boolean(node.operand, scope, "not takes true or false"))
    return Kind.NUMBER, _plus((1,), _scalar(node.operand, scope, "a sign takes a number")[1])


def _typed_binary(node: Any, scope: Scope) -> Typed:
    why = "arithmetic takes numbers"
    return Kind.NUMBER, _plus((1,), _scalar(node.left, scope, why)[1], _scalar(node.right, scope, why)[1])


def _typed_compare(node: Any, scope: Scope) -> Typed:
    steps: list[Steps] = [(1,), _scalar(node.left, scope, "a comparison takes numbers")[1]]
    for op, right in zip(node.ops, node.comparators, strict=True):
        if isinstance(op, ast.In | ast.NotIn):
            steps += [_listed(right, scope, "in looks in a list")[1], (0, COMPARING_STEPS)]
        else:
            steps.append(_scalar(right, scope, "a comparison takes numbers")[1])
    return Kind.BOOLEAN, _plus(*steps)


def _typed_subscript(node: Any, scope: Scope) -> Typed:
    kind, steps = _listed(node.value, scope, "an index takes a list")
    return _ELEMENT[kind], _plus((2,), steps)


def _typed_call(node: Any, scope: Scope) -> Typed:
    name = node.func.id
    if name == "abs" or (name in ("min", "max") and len(node.args) > 1):
        args = [_scalar(arg, scope, f"{name}() of values takes numbers") for arg in node.args]
        kinds = {kind for kind, _ in args}
        kind = Kind.BOOLEAN if name != "abs" and kinds == {Kind.BOOLEAN} else Kind.NUMBER
        call = CALL_STEPS if name == "abs" else VALUES_CALL_STEPS
        return kind, _plus((call,), *(s for _, s in args))
    kind, steps = _listed(node.args[0], scope, f"{name}() takes a list")
    given = {"all": Kind.BOOLEAN, "any": Kind.BOOLEAN, "len": Kind.NUMBER, "sum": Kind.NUMBER}
    walk = 1 if name in given else COMPARING_STEPS
    return given.get(name, _ELEMENT[kind]), _plus((CALL_STEPS, walk), steps)


def _typed_generator(node: Any, scope: Scope) -> Typed:
    generator = node.generators[0]
    kind, walked = _listed(generator.iter, scope, "a generator walks a list")
    inner = {**scope, generator.target.id: _ELEMENT[kind]}
    value, each = _scalar(node.elt, inner, "a generator's value is a number or true or false")
    why = "a generator's if takes true or false"
    each = _plus((GENERATOR_STEPS,), each, *(_boolean(test, inner, why) for test in generator.ifs))
    return _LIST[value], _plus((1,), walked, _times_length(each))


_TYPING: dict[type[ast.AST], Callable[[Any, Scope], Typed]] = {
    ast.Constant: lambda node, scope: (Kind.BOOLEAN if isinstance(node.value, bool) else Kind.NUMBER, (1,)),
    ast.Name: lambda node, scope: (scope[node.id], (1,)),
    ast.BoolOp: _typed_bool,
    ast.UnaryOp: _typed_unary,
    ast.BinOp: _typed_binary,
    ast.Compare: _typed_compare,
    ast.Subscript: _typed_subscript,
    ast.Call: _typed_call,
    ast.GeneratorExp: _typed_generator,
}


def _plus(*polynomials: Steps) -> Steps:
    size = max(len(p) for p in polynomials)
    return tuple(sum(p[i] for p in polynomials if i < len(p)) for i in range(size))


def _times_length(polynomial: Steps) -> Steps:
    return (0, *polynomial)


def _at(polynomial: Sequence[int], length: int) -> int:
    return sum(c * length**i for i, c in enumerate(polynomial))


# ----- compiling --------------------------------------------------------------------------------
class _Floats(ast.NodeTransformer):
    """Whole-number constants become floats (result's values are floats), so no arithmetic ever
    grows an integer of many digits; an index stays whole."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node.value = self.visit(node.value)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int:
            return ast.copy_location(ast.Constant(float(node.value)), node)
        return node
