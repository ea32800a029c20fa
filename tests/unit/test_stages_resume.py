"""A retried run-stages activity resumes after the last stage whose record the Node carries."""

from __future__ import annotations

import pytest

from fleetwright.activities.payloads import StagesRequest
from fleetwright.activities.stages import resume_index
from fleetwright.planner.node.stages import Stage
from fleetwright.planner.node.state import NodePackageState, PackageRecord, PendingChange, format_annotation
from tests.support.stagerequests import stage_request

pytestmark = pytest.mark.unit

STAGES = (Stage.APPLY, Stage.CONFIG)


def record(*done: Stage) -> NodePackageState:
    pending = PendingChange(version="1.0.0", stages=STAGES, done=done)
    return NodePackageState(profile="p", packages={"tuning": PackageRecord(pending=pending)})


def request() -> StagesRequest:
    stages = tuple(stage_request(stage, record=record(*STAGES[: i + 1])) for i, stage in enumerate(STAGES))
    return StagesRequest(profile="p", node="n", stages=stages)


def test_nothing_recorded_or_an_earlier_record_resumes_at_the_first_stage() -> None:
    assert resume_index(request(), None) == 0
    assert resume_index(request(), format_annotation(record())[1]) == 0


def test_a_passed_stage_recorded_resumes_after_it() -> None:
    assert resume_index(request(), format_annotation(record(Stage.APPLY))[1]) == 1
    assert resume_index(request(), format_annotation(record(*STAGES))[1]) == 2
