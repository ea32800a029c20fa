"""The NodeProfile status as a pure function of the rollout's published progress."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetwright.api.nodeprofile import NodeProfileStatus
from fleetwright.controller.profilestatus import Inputs, derive, rollout_phase, transitions
from fleetwright.workflows.payloads import Progress

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def progress(phase: str, **fields: object) -> Progress:
    base: dict[str, object] = {"profile": "p", "phase": phase, "message": f"{phase.lower()} message"}
    return Progress.model_validate({"generation": 1, "targeted": 4, **base, **fields})


def status(
    p: Progress | None,
    previous: NodeProfileStatus | None = None,
    now: datetime = T0,
    *,
    generation: int = 1,
    policy_missing: bool = False,
) -> NodeProfileStatus:
    inputs = Inputs(
        generation=generation,
        workflow_id="nodeprofile/p",
        policy="careful",
        progress=p,
        policy_missing=policy_missing,
    )
    return derive(inputs, previous, now)


def conditions(s: NodeProfileStatus) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in s.conditions}


def test_no_progress_yet_is_pending_and_not_ready() -> None:
    s = status(None)
    assert s.phase == "Pending"
    assert s.observed_generation is None
    assert conditions(s)["Ready"] == ("False", "RolloutPending")
    assert conditions(s)["Progressing"] == ("True", "RolloutStarting")


def test_a_missing_policy_says_so() -> None:
    s = status(None, policy_missing=True)
    assert conditions(s)["Ready"] == ("False", "PolicyNotFound")
    assert "careful" in s.conditions[0].message


def test_complete_is_ready_with_counts() -> None:
    s = status(progress("Complete", updated=4))
    assert s.phase == "Complete"
    assert s.progress == "4/4"
    assert s.nodes_complete == 4
    assert s.observed_generation == 1
    assert conditions(s) == {
        "Ready": ("True", "RolloutComplete"),
        "Progressing": ("False", "RolloutComplete"),
        "Paused": ("False", "NotPaused"),
        "Blocked": ("False", "NotBlocked"),
        "Degraded": ("False", "NotDegraded"),
        "Searchable": ("True", "SearchAttributesRegistered"),
    }
    assert all(c.observed_generation == 1 for c in s.conditions)


def test_a_completed_old_generation_is_not_ready_for_the_new_one() -> None:
    s = status(progress("Complete", updated=4), generation=2)
    assert s.phase == "Progressing"
    assert s.observed_generation == 1
    assert conditions(s)["Ready"] == ("False", "SpecChangePending")


def test_blocked_names_nodes_and_reasons_and_lists_issues() -> None:
    p = progress(
        "Blocked",
        running=1,
        blocked=1,
        blocked_nodes=("n1",),
        blocked_reasons={"n1": "drain blocked by PDB db/pdb"},
    )
    s = status(p)
    assert s.phase == "Blocked"
    blocked = next(c for c in s.conditions if c.type == "Blocked")
    assert (blocked.status, blocked.reason) == ("True", "NodesBlocked")
    assert "n1: drain blocked by PDB db/pdb" in blocked.message
    assert [(i.node, i.reason) for i in s.node_issues] == [("n1", "NodeBlocked")]


def test_a_node_waiting_for_its_unit_is_a_node_issue_with_the_reason() -> None:
    unit = (
        "WaitingForUnit: n3 of its workload cannot start (NotReady: the node is not Ready); at most until t"
    )
    p = progress(
        "Waiting",
        waiting=2,
        waiting_reasons={"n1": unit, "n2": "Budget: maxUnavailable 1 reached: n4"},
    )
    s = status(p)
    assert [(i.node, i.reason, i.message) for i in s.node_issues] == [("n1", "WaitingForUnit", unit)]


def test_halted_is_halted_and_degraded_naming_failed_nodes_and_their_stage() -> None:
    failure = "stage apply of tuning failed: Job fleetwright-tuning-apply-n2 (exit 1)"
    s = status(progress("Halted", failed=1, failed_nodes=("n2",), failed_reasons={"n2": failure}))
    assert s.phase == "Halted"  # the word the CLI and the engine use, not "Failed"
    assert conditions(s)["Degraded"] == ("True", "RolloutHalted")
    assert conditions(s)["Progressing"] == ("False", "RolloutHalted")
    assert "n2" in next(c for c in s.conditions if c.type == "Degraded").message
    assert [(i.node, i.reason, i.message) for i in s.node_issues] == [("n2", "StageFailed", failure)]


@pytest.mark.parametrize(
    ("engine", "fields", "shown"),
    [
        ("Progressing", {}, "Progressing"),
        ("Waiting", {}, "Progressing"),
        ("Blocked", {}, "Blocked"),
        ("Paused", {}, "Paused"),
        ("Halted", {}, "Halted"),
        ("Aborted", {}, "Aborted"),
        ("Complete", {"updated": 4}, "Complete"),
        ("Complete", {"updated": 3}, "Degraded"),
    ],
)
def test_one_vocabulary_the_status_phase_is_the_clis(engine: str, fields: dict[str, int], shown: str) -> None:
    p = progress(engine, **fields)
    assert status(p).phase == shown == rollout_phase(p, generation=1)


def test_nodes_waiting_for_their_own_budget_are_counted_apart_from_blocked_ones() -> None:
    s = status(progress("Progressing", running=1, waiting=3))
    assert (s.phase, s.nodes_in_progress, s.nodes_waiting, s.nodes_blocked) == ("Progressing", 1, 3, 0)
    assert conditions(s)["Blocked"] == ("False", "NotBlocked")


def test_paused_sets_paused_and_stops_progressing() -> None:
    s = status(progress("Paused", paused=True))
    assert s.phase == "Paused"
    assert conditions(s)["Paused"] == ("True", "PausedByUser")
    assert conditions(s)["Progressing"] == ("False", "Paused")


def test_transition_time_changes_only_when_status_changes() -> None:
    first = status(progress("Progressing", running=1))
    same = status(progress("Progressing", running=2, message="other"), first, now=T1)
    assert {c.type: c.last_transition_time for c in same.conditions} == dict.fromkeys(
        ("Ready", "Progressing", "Paused", "Blocked", "Degraded", "Searchable"), T0
    )
    done = status(progress("Complete", updated=4), same, now=T1)
    times = {c.type: c.last_transition_time for c in done.conditions}
    assert times["Ready"] == T1
    assert times["Progressing"] == T1
    assert times["Paused"] == T0


def test_the_same_inputs_give_the_same_status() -> None:
    first = status(progress("Progressing", running=1))
    assert status(progress("Progressing", running=1), first, now=T1) == first


def test_transitions_worth_an_event() -> None:
    pending = status(None)
    running = status(progress("Progressing", running=1), pending)
    paused = status(progress("Paused", paused=True), running)
    resumed = status(progress("Progressing", running=1), paused)
    done = status(progress("Complete", updated=4), resumed)
    halted = status(progress("Halted", failed=1, failed_nodes=("n2",)), running)
    assert [t.reason for t in transitions(pending, running)] == ["RolloutStarted"]
    assert [t.reason for t in transitions(running, paused)] == ["RolloutPaused"]
    assert [t.reason for t in transitions(paused, resumed)] == ["RolloutResumed"]
    assert [t.reason for t in transitions(resumed, done)] == ["RolloutComplete"]
    assert [(t.type, t.reason) for t in transitions(running, halted)] == [("Warning", "RolloutHalted")]
    assert transitions(running, status(progress("Progressing", running=2), running)) == []
    # A rollout that finished before the first mirror still says it started and completed.
    assert [t.reason for t in transitions(None, done)] == ["RolloutStarted", "RolloutComplete"]


def test_a_newly_adopted_generation_is_an_event() -> None:
    done = status(progress("Complete", updated=4))
    again = status(progress("Progressing", generation=2, running=1), done, generation=2)
    assert [t.reason for t in transitions(done, again)] == ["SpecChangeAccepted"]


def test_complete_with_targeted_nodes_left_over_is_not_ready() -> None:
    s = status(progress("Complete", updated=3, message="3/3 nodes updated"))
    assert s.phase == "Degraded"
    assert s.progress == "3/4"
    assert conditions(s)["Ready"] == ("False", "NodesNotUpdated")
    assert conditions(s)["Degraded"] == ("True", "NodesNotUpdated")
    assert conditions(s)["Progressing"] == ("False", "RolloutComplete")


def test_the_ready_message_says_how_many_nodes_the_preflight_spared() -> None:
    def ready(**fields: object) -> str:
        s = status(progress("Complete", updated=4, message="done", **fields))
        return next(c.message for c in s.conditions if c.type == "Ready")

    assert ready(spared=2) == "4/4 nodes updated (2 spared by preflight, never cordoned); done"
    assert ready() == "4/4 nodes updated; done"


def test_missing_search_attributes_are_named_with_how_to_register_them() -> None:
    missing = ("FleetwrightNode", "FleetwrightPackages")
    s = status(progress("Progressing", unregistered_search_attributes=missing))
    assert conditions(s)["Searchable"] == ("False", "SearchAttributesMissing")
    message = next(c.message for c in s.conditions if c.type == "Searchable")
    assert "FleetwrightNode, FleetwrightPackages" in message
    assert "--name FleetwrightPackages --type KeywordList" in message
    assert "FleetwrightProfile" not in message
    assert [t.reason for t in transitions(None, s)].count("SearchAttributesMissing") == 1
    assert "SearchAttributesMissing" not in [t.reason for t in transitions(s, s)]


def test_a_rollback_shows_rolling_back_then_the_generation_rolled_back_waiting_for_a_new_spec() -> None:
    rolling = status(progress("RollingBack", generation=2, rolled_back_generation=2), generation=2)
    assert rolling.phase == "RollingBack"
    assert conditions(rolling)["Ready"] == ("False", "RollingBack")
    assert conditions(rolling)["Progressing"] == ("True", "RollingBack")
    assert conditions(rolling)["Degraded"] == ("True", "RollingBack")
    assert "rolling back generation 2" in rolling.conditions[0].message
    back = status(progress("RolledBack", generation=2, rolled_back_generation=2), rolling, T1, generation=2)
    assert back.phase == "RolledBack"
    assert conditions(back)["Ready"] == ("False", "RolledBack")
    assert conditions(back)["Progressing"] == ("False", "RolledBack")
    ready = next(c for c in back.conditions if c.type == "Ready")
    assert "generation 2 rolled back; waiting for a spec with other packages" in ready.message
    assert [t.reason for t in transitions(rolling, back)] == ["RolledBack"]
    assert [t.type for t in transitions(None, rolling)] == ["Normal", "Warning"]  # started, rolling back
