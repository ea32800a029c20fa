"""Reads the Temporal payloads a newer fleetwright wrote with a release's own models, as that
release's worker and CLI would: run by path with only the release's tree on the path
(``releases.read_with_release``), so every ``fleetwright`` import is the release's; the current
checkout imports it for ``handlers`` alone.

Input (stdin, JSON): ``histories``, paths of workflow histories (``WorkflowHistory.to_json``), and
``queries``, query results (``workflow``, ``query``, ``id``, ``payload``: a serialized ``Payload``
in base64). Output (stdout, JSON): ``problems``, one line per payload the release refuses, naming
the history, the event and what the payload is; ``read``, how many payloads of each kind it read.

Each payload is read as the release's handler for it declares: a workflow's input, result and
continue-as-new input by its ``run``; an activity's input and result, a signal's, an update's
arguments and result, a query's result by the handler's signature; a memo value as the query of
the same name returns (the CLI reads the ``progress`` memo as the ``progress`` query's type). A
handler the release does not have is refused too, but a query it does not have is skipped: none
of its processes asks for it.
"""

from __future__ import annotations

import base64
import importlib
import json
import pkgutil
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory
from temporalio.common import _type_hints_from_func
from temporalio.contrib.pydantic import pydantic_data_converter

import fleetwright.activities
import fleetwright.workflows

Hints = tuple[list[type] | None, type | None]
"""A handler's argument types and its result type."""


def _modules() -> Iterator[ModuleType]:
    for package in (fleetwright.activities, fleetwright.workflows):
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            yield importlib.import_module(info.name)


def handlers() -> dict[tuple[str, ...], Hints]:
    """Every handler of the release: ``("workflow", type)``, ``(kind, type, name)`` for a signal,
    update and query, ``("activity", name)``."""
    found: dict[tuple[str, ...], Hints] = {}
    for module in _modules():
        found |= _activities(vars(module).values())
        for value in vars(module).values():
            if isinstance(value, type):
                found |= _workflow_handlers(value) | _activities(vars(value).values())
    return found


def _workflow_handlers(cls: type) -> dict[tuple[str, ...], Hints]:
    defn = workflow._Definition.from_class(cls)
    if defn is None:
        return {}
    owner = defn.name or ""
    found: dict[tuple[str, ...], Hints] = {("workflow", owner): _type_hints_from_func(defn.run_fn)}
    kinds: dict[str, Mapping[str | None, Any]] = {
        "signal": defn.signals,
        "update": defn.updates,
        "query": defn.queries,
    }
    for kind, named in kinds.items():
        for name, handler in named.items():
            found[(kind, owner, name or "")] = _type_hints_from_func(handler.fn)
    return found


def _activities(members: Iterable[object]) -> dict[tuple[str, ...], Hints]:
    found: dict[tuple[str, ...], Hints] = {}
    for member in members:
        defn = activity._Definition.from_callable(member) if callable(member) else None
        if defn is not None:
            found[("activity", defn.name or "")] = (defn.arg_types, defn.ret_type)
    return found


def refusal(payloads: Sequence[Payload], types: list[type] | None) -> str | None:
    """Why the release's data converter refuses ``payloads`` read as ``types``; None: it reads them."""
    if types is not None and len(payloads) > len(types):
        return f"{len(payloads)} arguments where the release takes {len(types)}"
    try:
        pydantic_data_converter.payload_converter.from_payloads(
            list(payloads), types[: len(payloads)] if types is not None else None
        )
    except Exception as error:  # any refusal is the finding, reported in full
        return f"{type(error).__name__}: {error}"
    return None


Read = tuple[str, tuple[str, ...], Sequence[Payload], bool]
"""One payload to read: what it is, the handler's key, the payloads, whether it is a result."""


def _reads(owner: str, event: HistoryEvent, names: dict[str, str]) -> Iterator[Read]:
    """The payloads ``event`` of a workflow of type ``owner`` carries; ``names`` keeps the
    activity and update names their results are read by (from their scheduling, acceptance)."""
    kind = event.WhichOneof("attributes")
    attrs: Any = getattr(event, kind) if kind else None
    run = ("workflow", owner)
    if kind == "workflow_execution_started_event_attributes":
        yield "workflow input", run, attrs.input.payloads, False
        yield from _memo(owner, attrs.memo.fields)
    elif kind == "workflow_execution_continued_as_new_event_attributes":
        yield "continue-as-new", run, attrs.input.payloads, False
        yield from _memo(owner, attrs.memo.fields)
    elif kind == "workflow_execution_completed_event_attributes":
        yield "workflow result", run, attrs.result.payloads, True
    elif kind == "workflow_properties_modified_event_attributes":
        yield from _memo(owner, attrs.upserted_memo.fields)
    elif kind == "activity_task_scheduled_event_attributes":
        names[f"activity {event.event_id}"] = attrs.activity_type.name
        yield "activity input", ("activity", attrs.activity_type.name), attrs.input.payloads, False
    elif kind == "activity_task_completed_event_attributes":
        name = names[f"activity {attrs.scheduled_event_id}"]
        yield "activity result", ("activity", name), attrs.result.payloads, True
    elif kind == "workflow_execution_signaled_event_attributes":
        yield "signal input", ("signal", owner, attrs.signal_name), attrs.input.payloads, False
    elif kind == "start_child_workflow_execution_initiated_event_attributes":
        yield "workflow input", ("workflow", attrs.workflow_type.name), attrs.input.payloads, False
    elif kind == "workflow_execution_update_accepted_event_attributes":
        update = attrs.accepted_request
        names[f"update {update.meta.update_id}"] = update.input.name
        yield "update input", ("update", owner, update.input.name), update.input.args.payloads, False
    elif kind == "workflow_execution_update_completed_event_attributes" and attrs.outcome.HasField("success"):
        name = names[f"update {attrs.meta.update_id}"]
        yield "update result", ("update", owner, name), attrs.outcome.success.payloads, True


def _memo(owner: str, fields: Any) -> Iterator[Read]:
    for key, payload in fields.items():
        yield "memo", ("query", owner, key), [payload], True


class Reader:
    """Reads payloads with the release's handlers, collecting what it refuses and counting what it
    read of each kind."""

    def __init__(self, found: dict[tuple[str, ...], Hints]) -> None:
        self.found = found
        self.problems: list[str] = []
        self.read_kinds: Counter[str] = Counter()

    def read(self, where: str, item: Read) -> None:
        what, key, payloads, result = item
        self.read_kinds[what] += 1
        hints = self.found.get(key)
        if hints is None:
            self.problems.append(f"{where}: {what}: the release has no {' '.join(key)}")
            return
        types = ([hints[1]] if hints[1] is not None else None) if result else hints[0]
        problem = refusal(payloads, types)
        if problem is not None:
            self.problems.append(f"{where}: {what} of {' '.join(key)}: {problem}")

    def history(self, name: str, text: str) -> None:
        events = WorkflowHistory.from_json(name, text).events
        owner = events[0].workflow_execution_started_event_attributes.workflow_type.name
        names: dict[str, str] = {}
        for event in events:
            for item in _reads(owner, event, names):
                self.read(f"{name} event {event.event_id}", item)


def main() -> None:
    request = json.load(sys.stdin)
    reader = Reader(handlers())
    for path in map(Path, request["histories"]):
        reader.history(path.name, path.read_text(encoding="utf-8"))
    for query in request["queries"]:
        key = ("query", query["workflow"], query["query"])
        if key in reader.found:
            payload = Payload.FromString(base64.b64decode(query["payload"]))
            reader.read(f"query {query['query']} of {query['id']}", ("query result", key, [payload], True))
    json.dump({"problems": reader.problems, "read": reader.read_kinds}, sys.stdout)


if __name__ == "__main__":
    main()
