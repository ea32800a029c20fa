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
skipped with the reason, since it cannot know what the other tests set. When ``tools/test.sh`` runs
the workflow tier in a pytest process of its own, that process leaves its record in the shared
directory ``FIELD_COVERAGE_DIR`` as it ends (``fieldcoverage.share``); this test waits
for every test file to be accounted for and judges the union.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.fieldcoverage import KINDS, RECORDER, SHARE_ENV, TESTS, Shared, requirements, shared
from tests.support.waiting import until

pytestmark = pytest.mark.integration

EXERCISING_DIRS = ("workflow", "integration")
# How long the workflow tier's process may still run once this one reaches its last test.
SHARED_WITHIN_SECONDS = 1800.0


def _not_run(session: pytest.Session, others: Shared) -> list[Path]:
    expected = {p for d in EXERCISING_DIRS for p in (TESTS / d).glob("test_*.py")}
    return sorted(expected - {item.path for item in session.items} - others.ran)


def _partial_run(session: pytest.Session, others: Shared) -> list[str]:
    reasons = [f"{p.relative_to(TESTS)} not in the session" for p in _not_run(session, others)]
    reasons += [
        f"{nodeid} deselected"
        for nodeid in sorted(RECORDER.deselected | others.deselected)
        if nodeid.split("/")[1] in EXERCISING_DIRS
    ]
    return reasons


@pytest.mark.timeout(SHARED_WITHIN_SECONDS + 300)
async def test_every_crd_spec_field_and_enum_value_reaches_the_engine(
    request: pytest.FixtureRequest, temporal_client: Client
) -> None:
    if os.environ.get(SHARE_ENV):
        await until(
            lambda: not _not_run(request.session, shared()),
            SHARED_WITHIN_SECONDS,
            "the other pytest processes' records of the workflow and integration test files",
        )
    others = shared()
    partial = _partial_run(request.session, others)
    if partial:
        pytest.skip("needs every workflow and integration test in the session: " + "; ".join(partial[:5]))
    assert await RECORDER.harvest(temporal_client) > 0
    wanted = set().union(*(requirements(kind) for kind in KINDS))
    missing = sorted(wanted - RECORDER.seen - others.seen)
    assert not missing, "CRD fields or enum values no workflow/integration test drives:\n" + "\n".join(
        missing
    )
