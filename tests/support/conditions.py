"""Random health-check conditions drawn from the condition language's grammar
(``fleetwright.api.healthcondition``), for its property test and its benchmark.

``condition(rng)`` writes a condition over a list ``result`` that uses every construct of the
language: comparisons, ``and``/``or``/``not``, arithmetic, indexing, ``in``, the functions, and
generators (nested ones too, which the step budget refuses). Not every one is admitted: too many
nodes, a budget overrun, a function of a list given a number are refused, as they should be.
"""

from __future__ import annotations

import random

VARIABLES = ("r", "s", "t")
NUMBER_OPS = ("+", "-", "*", "/", "%")
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def condition(rng: random.Random, depth: int = 4) -> str:
    """A condition: true or false over ``result`` (a list of numbers)."""
    return _boolean(rng, (), depth)


def values(rng: random.Random, length: int) -> list[float]:
    """A result of ``length`` values, small and whole often enough that equality holds."""
    pick = (lambda: float(rng.randint(-3, 3)), lambda: rng.uniform(-1e3, 1e3), lambda: 0.0)
    return [rng.choice(pick)() for _ in range(length)]


def _boolean(rng: random.Random, scope: tuple[str, ...], depth: int) -> str:
    if depth <= 0:
        return rng.choice(("True", "False", f"{_number(rng, scope, 0)} > 0"))
    choice = rng.randrange(6)
    if choice == 0:
        op = rng.choice(COMPARISONS)
        return f"{_number(rng, scope, depth - 1)} {op} {_number(rng, scope, depth - 1)}"
    if choice == 1:
        return f"{_number(rng, scope, depth - 1)} {rng.choice(('in', 'not in'))} result"
    if choice == 2:
        return f"{rng.choice(('all', 'any'))}({_generator(rng, scope, depth - 1)})"
    if choice == 3:
        return f"not ({_boolean(rng, scope, depth - 1)})"
    if choice == 4:
        op = rng.choice(("and", "or"))
        return f"({_boolean(rng, scope, depth - 1)}) {op} ({_boolean(rng, scope, depth - 1)})"
    return f"{_number(rng, scope, depth - 1)} < {_number(rng, scope, depth - 1)} <= {rng.randint(-5, 5)}"


def _number(rng: random.Random, scope: tuple[str, ...], depth: int) -> str:
    leaves = [str(rng.randint(-5, 5)), f"{rng.uniform(-10, 10):.3g}", f"result[{rng.randint(-3, 3)}]"]
    leaves += list(scope)
    if depth <= 0:
        return rng.choice(leaves)
    choice = rng.randrange(6)
    if choice == 0:
        return rng.choice(leaves)
    if choice == 1:
        op = rng.choice(NUMBER_OPS)
        return f"({_number(rng, scope, depth - 1)} {op} {_number(rng, scope, depth - 1)})"
    if choice == 2:
        return f"{rng.choice(('len', 'sum', 'min', 'max'))}({_generator(rng, scope, depth - 1)})"
    if choice == 3:
        return f"{rng.choice(('len', 'sum', 'min', 'max'))}(result)"
    if choice == 4:
        args = ", ".join(_number(rng, scope, depth - 1) for _ in range(rng.randint(2, 3)))
        return f"{rng.choice(('min', 'max'))}({args})"
    return f"{rng.choice(('abs', '-'))}({_number(rng, scope, depth - 1)})"


def _generator(rng: random.Random, scope: tuple[str, ...], depth: int) -> str:
    free = [v for v in VARIABLES if v not in scope]
    variable = rng.choice(free) if free else VARIABLES[0]
    inner = (*scope, variable)
    value = _boolean(rng, inner, depth) if rng.random() < 0.5 else _number(rng, inner, depth)
    test = f" if {_boolean(rng, inner, depth - 1)}" if rng.random() < 0.3 else ""
    return f"{value} for {variable} in result{test}"
