"""Which of fleetwright's search attributes a namespace lacks, from what it lists."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import IndexedValueType

from fleetwright.process.searchattrs import missing, type_name
from fleetwright.workflows.search import REGISTRATION

pytestmark = pytest.mark.unit


def test_types_are_spelled_as_the_registration_spells_them() -> None:
    assert type_name(IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST) == "KeywordList"
    assert type_name(IndexedValueType.INDEXED_VALUE_TYPE_INT) == "Int"
    assert set(REGISTRATION.values()) <= {type_name(v) for v in IndexedValueType.values()}


def test_absent_and_mistyped_attributes_are_missing() -> None:
    assert missing(REGISTRATION) == ()
    assert missing({}) == tuple(sorted(REGISTRATION))
    registered = {**REGISTRATION, "FleetwrightNode": "Text"}
    del registered["FleetwrightPhase"]
    assert missing(registered) == ("FleetwrightNode", "FleetwrightPhase")
