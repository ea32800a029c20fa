"""Every field of the CRDs' spec is driven through the rollout engine by some workflow- or
integration-tier test, and every enum value is (so no field or value can again be accepted without
behaviour behind it).

How it cannot pass vacuously: the record is what actually reached the engine during this session:
every profile and policy converted in this process while a workflow or integration test ran
(``tests/support/fieldcoverage.py`` wraps ``convert.rollout_spec``, the one door from the API
models into the engine), and every one the session's Temporal server carried to a rollout workflow
run by a worker in a process of its own (read back from the histories); a field
counts only with a value that is neither empty nor its schema default, so objects read back from
the API server (which carry every default) cover nothing by themselves; the list of fields comes
from the generated CRDs, so a new field is required the moment it is added. It runs last
(``tests/conftest.py`` orders it), and only judges a session that ran every workflow and
integration test file with nothing deselected; a partial run (``-m integration``, one file) is
skipped with the reason, since it cannot know what the other tests set.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.fieldcoverage import KINDS, RECORDER, requirements

pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parents[1]
EXERCISING_DIRS = ("workflow", "integration")


def _partial_run(session: pytest.Session) -> list[str]:
    expected = {p for d in EXERCISING_DIRS for p in (TESTS / d).glob("test_*.py")}
    ran = {item.path for item in session.items}
    reasons = [f"{p.relative_to(TESTS)} not in the session" for p in sorted(expected - ran)]
    reasons += [
        f"{nodeid} deselected"
        for nodeid in sorted(RECORDER.deselected)
        if nodeid.split("/")[1] in EXERCISING_DIRS
    ]
    return reasons


async def test_every_crd_spec_field_and_enum_value_reaches_the_engine(
    request: pytest.FixtureRequest, temporal_client: Client
) -> None:
    partial = _partial_run(request.session)
    if partial:
        pytest.skip("needs every workflow and integration test in the session: " + "; ".join(partial[:5]))
    assert await RECORDER.harvest(temporal_client) > 0
    wanted = set().union(*(requirements(kind) for kind in KINDS))
    missing = sorted(wanted - RECORDER.seen)
    assert not missing, "CRD fields or enum values no workflow/integration test drives:\n" + "\n".join(
        missing
    )
