"""Which fields of the CRDs' ``spec`` the workflow and integration tiers actually drive through the
rollout engine, measured against the generated CRD schemas (``crds/``).

The one door from the API models into the engine is ``fleetwright.planner.convert.rollout_spec``
(the rollout workflow calls it for every profile and policy it serves). ``install`` wraps it so that,
while a workflow- or integration-tier test runs, every NodeProfile and DeploymentPolicy passing
through is recorded against its CRD schema:

- a field counts as set only with a value other than its schema default and other than empty
  (objects read back from the API server carry every default, and a default is not a choice
  anybody made, so defaulting alone can never cover a field);
- every value of an ``enum`` must be seen (``failure.action: rollback`` is a value, not a field);
- a type used at several places (a label selector, a step) is one set of fields: its fields count
  wherever it is used, and each place must be set by some test;
- a second spelling the API accepts for an enum value (``restart_all_services``) is no value of
  its own: the models store the canonical one, so nothing past admission can tell them apart (the
  API model tests parse it).

When the tiers run in pytest processes of their own (``tools/test.sh``: the workflow tier beside
the integration tier), each process that does not run the coverage test leaves what it recorded
and which test files it ran in the directory ``FIELD_COVERAGE_DIR`` names (``share``),
and the coverage test judges the union (``shared``).

Owns the schema walk, the recorder and the shared records; the test and the pytest hooks that
switch recording on per tier live in ``tests/integration/test_crd_field_coverage.py`` and
``tests/conftest.py``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.api.interrupttypes import INTERRUPT_TYPE_SPELLINGS
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.planner import convert
from fleetwright.workflows.payloads import Deletion, RolloutInput, SpecChange
from fleetwright.workflows.rollout import ROLLOUT_WORKFLOW

TESTS = Path(__file__).resolve().parents[1]
CRD_DIR = TESTS.parent / "crds"
SHARE_ENV = "FIELD_COVERAGE_DIR"
"""The directory where the pytest processes of one run leave their records for the coverage test."""
KINDS = {
    "NodeProfile": "nodeprofiles.fleetwright.io.yaml",
    "DeploymentPolicy": "deploymentpolicies.fleetwright.io.yaml",
}

Schema = Mapping[str, Any]
# Enum values the API accepts and stores as another value.
SPELLINGS = frozenset(k for k, v in INTERRUPT_TYPE_SPELLINGS.items() if k != v)


def spec_schema(kind: str) -> Schema:
    crd = yaml.safe_load((CRD_DIR / KINDS[kind]).read_text())
    (version,) = crd["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _children(schema: Schema) -> Iterator[tuple[str, Schema]]:
    """Sub-schemas one level down: object properties by name, list items as ``[]``."""
    for name, sub in (schema.get("properties") or {}).items():
        yield f".{name}", sub
    items = schema.get("items")
    if schema.get("type") == "array" and items and "properties" in items:
        yield "[]", items


def requirements(kind: str) -> set[str]:
    """Every leaf field of ``kind``'s spec (``NodeProfile.spec.packages[].version``), and one
    ``path=value`` entry per value of every enum. A type used at several places (a label selector,
    a step, a failure rule, an interrupt) has its fields required at its first place only, by
    ``_homes``; each other place is one requirement of its own: that it is set at all."""
    wanted: set[str] = set()

    def walk(schema: Schema, path: str) -> None:
        children = list(_children(schema))
        if children and _home(schema, path) != path:
            wanted.add(path)
            return
        for suffix, sub in children:
            walk(sub, path + suffix)
        if children:
            return
        wanted.add(path)
        wanted.update(f"{path}={value}" for value in _enum(schema))

    walk(spec_schema(kind), f"{kind}.spec")
    return wanted


@functools.cache
def _homes() -> dict[str, str]:
    """Each shared object schema (compared without descriptions and its own CEL rules, which say
    what the place means, not what the type is) and the first path it appears at."""
    homes: dict[str, str] = {}

    def walk(schema: Schema, path: str) -> None:
        children = list(_children(schema))
        if children:
            homes.setdefault(_shape(schema), path)
        for suffix, sub in children:
            walk(sub, path + suffix)

    for kind in KINDS:
        walk(spec_schema(kind), f"{kind}.spec")
    return homes


def _home(schema: Schema, path: str) -> str:
    return _homes().get(_shape(schema), path)


_SHAPES: dict[int, tuple[Schema, str]] = {}


def _shape(schema: Schema) -> str:
    """``_canonical`` of a schema, once per schema object (the recorder runs inside workflow
    tasks, which must stay well under the SDK's deadlock timeout)."""
    known = _SHAPES.get(id(schema))
    if known is None or known[0] is not schema:
        known = _SHAPES[id(schema)] = (schema, _canonical(schema))
    return known[1]


def _canonical(schema: Schema) -> str:
    def bare(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: bare(v) for k, v in node.items() if k != "description"}
        if isinstance(node, list):
            return [bare(v) for v in node]
        return node

    own = {k: v for k, v in schema.items() if k not in ("description", "x-kubernetes-validations")}
    return json.dumps(bare(own), sort_keys=True)


def _enum(schema: Schema) -> list[Any]:
    items = schema.get("items") or {}
    return [v for v in schema.get("enum") or items.get("enum") or [] if v not in SPELLINGS]


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


def observed(kind: str, spec: Any, schema: Schema) -> set[str]:
    """What one spec (JSON, camelCase) sets, in ``requirements``' terms."""
    seen: set[str] = set()

    def walk(value: Any, schema: Schema, path: str) -> None:
        if _empty(value):
            return
        children = dict(_children(schema))
        if children:
            home = _home(schema, path)
            if home != path:
                seen.add(path)
                path = home
            if isinstance(value, list):
                for item in value:
                    walk(item, children["[]"], path + "[]")
            elif isinstance(value, dict):
                for name, sub in value.items():
                    if f".{name}" in children:
                        walk(sub, children[f".{name}"], f"{path}.{name}")
            return
        for item in value if isinstance(value, list) and _enum(schema) else [value]:
            if item in _enum(schema):
                seen.add(f"{path}={item}")
        if "default" not in schema or value != schema["default"]:
            seen.add(path)

    walk(spec, schema, f"{kind}.spec")
    return seen


@dataclass
class Recorder:
    """Fields seen while ``active``; ``install`` feeds it."""

    active: bool = False
    seen: set[str] = field(default_factory=set)
    deselected: set[str] = field(default_factory=set)
    """Test ids the session deselected (``-m``, ``-k``): a partial run cannot judge coverage."""
    schemas: dict[str, Schema] = field(default_factory=lambda: {kind: spec_schema(kind) for kind in KINDS})

    def observe(self, profile: NodeProfile, policy: DeploymentPolicy | None) -> None:
        for kind, model in (("NodeProfile", profile), ("DeploymentPolicy", policy)):
            if model is not None:
                spec = model.model_dump(mode="json", by_alias=True, exclude_none=True)["spec"]
                self.seen |= observed(kind, spec, self.schemas[kind])

    async def harvest(self, client: Client) -> int:
        """Observe every profile and policy that reached a rollout workflow on ``client``'s server
        (its input, each ``spec_changed`` and ``deleted`` signal): the integration tier's workers
        run in processes of their own, out of ``install``'s reach. Returns the runs read."""
        runs = 0
        async for execution in client.list_workflows(f"WorkflowType = '{ROLLOUT_WORKFLOW}'"):
            handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
            async for event in handle.fetch_history_events():
                for model in await _specs_in(client, event):
                    self.observe(model.profile, model.policy)
            runs += 1
        return runs


RECORDER = Recorder()


@dataclass(frozen=True)
class Shared:
    """The union of the records the session's other pytest processes left (``share``)."""

    seen: frozenset[str] = frozenset()
    ran: frozenset[Path] = frozenset()
    deselected: frozenset[str] = frozenset()


def share(ran: set[Path]) -> None:
    """Leave the fields recorded, the test files ``ran`` and the deselected tests in the shared
    directory, when there is one; written whole, then renamed, so a reader never sees half of it."""
    directory = os.environ.get(SHARE_ENV)
    if not directory:
        return
    record = {
        "seen": sorted(RECORDER.seen),
        "ran": sorted(str(path.relative_to(TESTS)) for path in ran),
        "deselected": sorted(RECORDER.deselected),
    }
    target = Path(directory) / f"{os.getpid()}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(record))
    partial.rename(target)


def shared() -> Shared:
    """What the other processes of this run left (nothing without a shared directory)."""
    directory = os.environ.get(SHARE_ENV)
    if not directory:
        return Shared()
    records = [json.loads(path.read_text()) for path in sorted(Path(directory).glob("*.json"))]
    return Shared(
        seen=frozenset(name for record in records for name in record["seen"]),
        ran=frozenset(TESTS / name for record in records for name in record["ran"]),
        deselected=frozenset(nodeid for record in records for nodeid in record["deselected"]),
    )


def install() -> None:
    """Wrap ``convert.rollout_spec`` (once) so every profile and policy it converts is observed.
    ``fleetwright.planner`` is passed through the workflow sandbox, so the workflows call the
    wrapped function too."""
    original: Callable[..., Any] = convert.rollout_spec
    if getattr(original, "__wrapped__", None) is not None:
        return
    _homes()  # parse the CRDs now, not in the first workflow task that converts a spec

    @functools.wraps(original)
    def recorded(profile: NodeProfile, deployment_policy: DeploymentPolicy, *args: Any, **kwargs: Any) -> Any:
        if RECORDER.active:
            RECORDER.observe(profile, deployment_policy)
        return original(profile, deployment_policy, *args, **kwargs)

    convert.rollout_spec = recorded


_SIGNALS: dict[str, type[SpecChange | Deletion]] = {"spec_changed": SpecChange, "delete": Deletion}


async def _specs_in(client: Client, event: HistoryEvent) -> list[RolloutInput | SpecChange | Deletion]:
    """The specs one rollout history event carries to the engine."""
    if event.HasField("workflow_execution_started_event_attributes"):
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        return list(await client.data_converter.decode(payloads, [RolloutInput]))
    if event.HasField("workflow_execution_signaled_event_attributes"):
        signal = event.workflow_execution_signaled_event_attributes
        kind = _SIGNALS.get(signal.signal_name)
        if kind is not None:
            return list(await client.data_converter.decode(signal.input.payloads, [kind]))
    return []
