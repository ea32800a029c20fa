"""The size rule of the package's code: no module over ``MODULE_LINES`` lines, no class over
``CLASS_LINES`` (its decorators included). A module or class past them owns more than one concern:
split it by concern rather than raising the limit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fleetwright

pytestmark = pytest.mark.unit

MODULE_LINES = 450
CLASS_LINES = 300
PACKAGE = Path(fleetwright.__file__).parent


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def class_lengths(path: Path) -> dict[str, int]:
    """Every class of the module (nested ones too) and its length in lines."""
    lengths: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            lengths[f"{name(path)}::{node.name}"] = node.end_lineno - first + 1
    return lengths


def test_the_package_has_modules() -> None:
    """The rule below looks at the real package, not an empty folder."""
    assert len(modules()) > 50


def test_no_module_is_longer_than_the_limit() -> None:
    long = {name(p): n for p in modules() if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines (split them by concern): {long}"


def test_no_class_is_longer_than_the_limit() -> None:
    long = {c: n for p in modules() for c, n in class_lengths(p).items() if n > CLASS_LINES}
    assert not long, f"classes over {CLASS_LINES} lines (split them by concern): {long}"
