"""House rules the code keeps as it grows, read from its syntax trees: a class name is defined once
in ``fleetwright/`` (an API model and the planner's own view of it may share one, listed in
``API_PLANNER_PAIRS``: the layer says which is which), and every function and class of
``fleetwright/`` is referenced somewhere in the repository (``fleetwright/``, ``tests/``,
``bench/``, ``tools/``) beside its definition: no dead code.

What a framework calls by itself counts as referenced: ``__dunder__`` methods, what a framework
decorator registers (pydantic validators, Temporal handlers and their validators, typer
commands), the entry points of ``pyproject.toml``, a method that overrides one of a base class
outside fleetwright (a ``logging``, ``asyncio`` or ``click`` hook), and the methods the standard
library dispatches by name (``do_GET`` of an HTTP handler, ``visit_Name`` of an AST visitor)."""

from __future__ import annotations

import ast
import importlib
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("fleetwright", "tests", "bench", "tools")

_POLICY = "planner.policy.model"
API_PLANNER_PAIRS: dict[str, tuple[str, str]] = {
    "ApprovalStep": ("api.gatesteps", _POLICY),
    "BatchesStep": ("api.deploymentpolicy", _POLICY),
    "CanaryStep": ("api.gatesteps", _POLICY),
    "Compartment": ("api.deploymentpolicy", _POLICY),
    "FailurePolicy": ("api.deploymentpolicy", _POLICY),
    "HealthGate": ("api.health", _POLICY),
    "SoakStep": ("api.gatesteps", _POLICY),
    "WorkloadWait": ("api.workloadwait", _POLICY),
    "Interrupt": ("api.nodeprofile", "planner.node.interrupts"),
}
"""Class names an API model shares with the planner's own view of it: (API module, planner module)."""

FRAMEWORK_DECORATORS = frozenset(
    {
        "field_validator",  # pydantic
        "model_validator",
        "field_serializer",
        "model_serializer",
        "computed_field",
        "defn",  # Temporal: workflow.defn, activity.defn and the handlers of a workflow
        "run",
        "signal",
        "query",
        "update",
        "validator",  # Temporal: an update's validator, ``@approve.validator``
        "command",  # typer: ``@app.command(...)``
        "callback",
    }
)
"""The decorators by whose name a framework registers (and so calls) what they decorate."""

DISPATCHED_BY_NAME: tuple[tuple[type, str], ...] = (
    (BaseHTTPRequestHandler, "do_"),
    (ast.NodeVisitor, "visit_"),
)
"""Standard-library bases that call a method by a name they build: ``do_`` + the HTTP method,
``visit_`` + the node's class."""


@dataclass(frozen=True)
class Definition:
    module: str
    """Dotted, below ``fleetwright`` (``planner.node.work``)."""
    name: str
    line: int
    decorators: tuple[str, ...]
    owner: str | None = None
    """The class a method is defined on, else None."""
    bases: tuple[str, ...] = ()
    """That class's bases, as written (``asyncio.DatagramProtocol``)."""

    def __str__(self) -> str:
        where = f"{self.owner}.{self.name}" if self.owner else self.name
        return f"fleetwright/{self.module.replace('.', '/')}.py:{self.line} {where}"


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def definitions(module: str, tree: ast.Module) -> Iterator[Definition]:
    """Every class and function ``tree`` defines, nested ones included, in line order."""
    classes = {
        id(item): node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for item in node.body
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            decorators = tuple(_decorator_name(d) for d in node.decorator_list)
            owner = classes.get(id(node))
            bases = tuple(ast.unparse(b) for b in owner.bases) if owner else ()
            found.append(
                Definition(module, node.name, node.lineno, decorators, owner.name if owner else None, bases)
            )
    yield from sorted(found, key=lambda d: d.line)


def references(tree: ast.Module) -> Iterator[str]:
    """Every name ``tree`` uses: read, called, an attribute of something, or imported."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias):
            yield node.name.rpartition(".")[2]


def duplicates(defined: Mapping[str, list[str]], allowed: Mapping[str, tuple[str, str]]) -> list[str]:
    """Each class name defined more than once (``defined``: name -> the modules defining it, once
    per definition), unless it is an allowed pair defined exactly there."""
    found = []
    for name, modules in sorted(defined.items()):
        if len(modules) > 1 and sorted(modules) != sorted(allowed.get(name, ())):
            found.append(f"{name}: {', '.join(modules)}")
    return found


def dead(
    defined: list[Definition],
    used: Counter[str],
    entry_points: set[str],
    called_by_a_base: Callable[[Definition], bool],
) -> list[Definition]:
    """The definitions nothing refers to and no framework calls."""
    return [
        d
        for d in defined
        if not used[d.name]
        and d.name not in entry_points
        and not (d.name.startswith("__") and d.name.endswith("__"))
        and not FRAMEWORK_DECORATORS.intersection(d.decorators)
        and not called_by_a_base(d)
    ]


def _called_by_a_base(d: Definition) -> bool:
    """A method a base class outside fleetwright defines (an override) or dispatches by name."""
    namespace = vars(importlib.import_module(f"fleetwright.{d.module}"))
    for written in d.bases:
        first, *rest = written.split(".")
        base = namespace[first]
        for attr in rest:
            base = getattr(base, attr)
        outside = [c for c in base.__mro__ if not c.__module__.startswith("fleetwright")]
        if any(d.name in vars(c) for c in outside):
            return True
        if any(issubclass(base, cls) and d.name.startswith(p) for cls, p in DISPATCHED_BY_NAME):
            return True
    return False


def _trees(root: str) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted((REPO / root).rglob("*.py")):
        if path.is_file():
            yield path, ast.parse(path.read_text(), str(path))


def _module(path: Path) -> str:
    return ".".join(path.relative_to(REPO / "fleetwright").with_suffix("").parts)


def _entry_points() -> set[str]:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    return {target.rpartition(":")[2] for target in scripts.values()}


def _classes() -> dict[str, list[str]]:
    defined: dict[str, list[str]] = defaultdict(list)
    for path, tree in _trees("fleetwright"):
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                defined[node.name].append(_module(path))
    return defined


def test_no_class_name_is_defined_twice() -> None:
    found = duplicates(_classes(), API_PLANNER_PAIRS)
    assert not found, "class names defined more than once; name the non-API one for what it holds:\n" + (
        "\n".join(found)
    )


def test_each_allowed_pair_is_an_api_model_and_its_planner_view() -> None:
    defined = _classes()
    for name, (api, planner) in API_PLANNER_PAIRS.items():
        assert api.startswith("api."), name
        assert planner.startswith("planner."), name
        assert sorted(defined[name]) == sorted((api, planner)), f"{name} is no longer that pair: drop it"


def test_no_function_or_class_of_fleetwright_is_dead() -> None:
    used: Counter[str] = Counter()
    defined: list[Definition] = []
    for root in SOURCES:
        for path, tree in _trees(root):
            used.update(references(tree))
            if root == "fleetwright":
                defined.extend(definitions(_module(path), tree))
    found = dead(defined, used, _entry_points(), _called_by_a_base)
    assert not found, "defined in fleetwright/ and referenced nowhere:\n" + "\n".join(map(str, found))


SAMPLE = """
class Model:
    @field_validator("x")
    def _checked(cls, v): return v

    def __repr__(self): return ""

    def unused_method(self): ...

def used(): ...
def unused(): ...
def main(): ...

used(Model)
"""


def test_the_dead_code_check_finds_what_nothing_refers_to() -> None:
    tree = ast.parse(SAMPLE)

    found = dead(list(definitions("sample", tree)), Counter(references(tree)), {"main"}, lambda d: False)
    assert [str(d) for d in found] == [
        "fleetwright/sample.py:8 Model.unused_method",
        "fleetwright/sample.py:11 unused",
    ]


def test_the_duplicate_check_allows_only_the_listed_pair() -> None:
    pairs = {"Step": ("api.policy", "planner.policy")}
    assert duplicates({"Step": ["api.policy", "planner.policy"]}, pairs) == []
    assert duplicates({"Step": ["api.policy", "agent.config"]}, pairs) == ["Step: api.policy, agent.config"]
    assert duplicates({"Phase": ["planner.a", "planner.b"]}, pairs) == ["Phase: planner.a, planner.b"]
