"""Structured logs: JSON lines with the rollout context (profile, node, stage, workflow id) from
Temporal's logger extras and from ``bind``; a readable line on a terminal."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from fleetwright.process import logs

pytestmark = pytest.mark.unit


def record(message: str = "drained", **extra: object) -> logging.LogRecord:
    made = logging.makeLogRecord({"name": "fleetwright.test", "levelname": "INFO", "msg": message})
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_workflow_ids_name_the_profile_and_node() -> None:
    assert logs.ids_from_workflow_id("node/gpu-tuning/node-7") == {"profile": "gpu-tuning", "node": "node-7"}
    assert logs.ids_from_workflow_id("nodeprofile/gpu-tuning") == {"profile": "gpu-tuning"}
    assert logs.ids_from_workflow_id("something-else") == {}


def test_json_carries_temporal_workflow_info_and_bound_fields() -> None:
    temporal = {"workflow_id": "node/gpu-tuning/node-7", "run_id": "r1", "workflow_type": "fleetwright.node"}
    with logs.bind(stage="apply", package="tuning@1.0.0"):
        line = logs.JsonFormatter().format(record(temporal_workflow=temporal, attempt=2))
    entry = json.loads(line)
    assert entry["message"] == "drained"
    assert entry["level"] == "INFO"
    assert entry["logger"] == "fleetwright.test"
    assert entry["profile"] == "gpu-tuning"
    assert entry["node"] == "node-7"
    assert entry["stage"] == "apply"
    assert entry["package"] == "tuning@1.0.0"
    assert entry["workflow_id"] == "node/gpu-tuning/node-7"
    assert entry["run_id"] == "r1"
    assert entry["attempt"] == 2  # other extra fields are kept
    assert "temporal_workflow" not in entry


def test_activity_info_gives_the_activity_and_its_workflow() -> None:
    temporal = {
        "activity_type": "fleetwright.node.drain",
        "workflow_id": "node/p/n1",
        "workflow_run_id": "r9",
    }
    entry = json.loads(logs.JsonFormatter().format(record(temporal_activity=temporal)))
    assert (entry["activity"], entry["node"], entry["run_id"]) == ("fleetwright.node.drain", "n1", "r9")


def test_bind_is_scoped() -> None:
    with logs.bind(profile="a"), logs.bind(node="n"):
        assert logs.context_of(record()) == {"profile": "a", "node": "n"}
    assert logs.context_of(record()) == {}


def test_exceptions_are_one_json_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = record()
        failed.exc_info = sys.exc_info()
    entry = json.loads(logs.JsonFormatter().format(failed))
    assert "ValueError: boom" in entry["exception"]


def test_text_lines_end_with_the_context() -> None:
    line = logs.TextFormatter().format(record(temporal_workflow={"workflow_id": "node/p/n1", "run_id": "r"}))
    assert line.endswith("drained  profile=p node=n1 workflow_id=node/p/n1")
    assert "run_id" not in line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_text_on_a_terminal_and_json_otherwise() -> None:
    assert not logs.wants_json("auto", Terminal())
    assert logs.wants_json("auto", io.StringIO())
    assert logs.wants_json("json", Terminal())
    assert not logs.wants_json("text", io.StringIO())


def test_configure_replaces_the_root_handlers() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        logs.configure("json", "DEBUG", stream)
        logging.getLogger("fleetwright.x").debug("hello %s", "there", extra={"node": "n3"})
    finally:
        root.handlers[:] = saved
        root.setLevel(level)
    entry = json.loads(stream.getvalue().strip().splitlines()[-1])
    assert (entry["message"], entry["level"], entry["node"]) == ("hello there", "DEBUG", "n3")
