"""The pure parts of deleting a NodeProfile: what the removal converges to, how a deletion shows
in the status (the ``Deleting`` condition and its Events), and what the clean-up still finds on
a Node."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwright.activities.cleanup import Leftovers, leftovers
from fleetwright.api.keys import (
    condition_type,
    cordon_key,
    state_key,
    status_label_key,
    unit_wait_condition_type,
)
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.controller.profilestatus import Inputs, derive, transitions
from fleetwright.local import examples
from fleetwright.planner import convert
from fleetwright.planner.node.state import PackageRecord
from fleetwright.planner.node.work import plan_node
from fleetwright.workflows.payloads import Progress

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def profile_with(packages: list[dict[str, Any]]) -> NodeProfile:
    body = examples.profile("p").model_dump(mode="json", by_alias=True, exclude_none=True)
    body["spec"]["packages"] = packages
    return NodeProfile.model_validate(body)


def pkg(name: str, *, uninstall: bool, depends: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "version": "1.0.0",
        "image": f"ghcr.io/fleetwright/packages/{name}",
        "uninstall": {"enabled": uninstall},
    }
    if depends:
        out["dependsOn"] = [{"name": depends, "version": "1.0.0"}]
    return out


# ----- the removal target -------------------------------------------------------------------------
def test_the_removal_uninstalls_only_uninstall_enabled_packages() -> None:
    profile = profile_with([pkg("base", uninstall=False), pkg("agent", uninstall=True, depends="base")])
    removal = convert.removal_packages(profile)
    assert [(p.name, p.uninstall, p.depends_on) for p in removal] == [("agent", True, ())]
    spec = convert.rollout_spec(profile, examples.policy(), removing=True)
    assert spec.target != convert.rollout_spec(profile, examples.policy()).target
    installed = {"base": PackageRecord(version="1.0.0"), "agent": PackageRecord(version="1.0.0")}
    work = plan_node(spec.graph, installed)
    assert [(w.package, w.action.value) for w in work.packages] == [("agent", "uninstall")]


def test_the_removal_never_installs_on_a_node_without_the_packages() -> None:
    profile = profile_with([pkg("base", uninstall=False), pkg("agent", uninstall=True)])
    spec = convert.rollout_spec(profile, examples.policy(), removing=True)
    assert not plan_node(spec.graph, {}).needs_work


def test_uninstalling_dependents_run_before_their_dependencies() -> None:
    profile = profile_with([pkg("base", uninstall=True), pkg("agent", uninstall=True, depends="base")])
    spec = convert.rollout_spec(profile, examples.policy(), removing=True)
    installed = {"base": PackageRecord(version="1.0.0"), "agent": PackageRecord(version="1.0.0")}
    steps = plan_node(spec.graph, installed).steps
    assert [s.packages for s in steps] == [("agent",), ("base",)]


# ----- the status while deleting ----------------------------------------------------------------
def progress(phase: str, **fields: object) -> Progress:
    base: dict[str, object] = {"profile": "p", "phase": phase, "message": f"{phase.lower()} message"}
    return Progress.model_validate({"generation": 2, "targeted": 3, "deleting": True, **base, **fields})


def derived(p: Progress | None, previous: Any = None, *, deleting: bool = True) -> Any:
    inputs = Inputs(
        generation=2, workflow_id="nodeprofile/p", policy="careful", progress=p, deleting=deleting
    )
    return derive(inputs, previous, T0)


def deleting(status: Any) -> tuple[str, str, str]:
    c = next(c for c in status.conditions if c.type == "Deleting")
    return c.status, c.reason, c.message


def test_a_deletion_in_progress_is_phase_deleting_and_not_ready() -> None:
    s = derived(progress("Progressing", updated=1, running=1, running_nodes=("n2",)))
    assert s.phase == "Deleting"
    assert deleting(s)[:2] == ("True", "Uninstalling")
    assert "1/3" in deleting(s)[2]
    ready = next(c for c in s.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "Deleting")


def test_a_deletion_not_yet_picked_up_is_pending() -> None:
    s = derived(progress("Complete", deleting=False, updated=3))
    assert deleting(s)[:2] == ("True", "DeletionPending")
    assert s.phase == "Deleting"


def test_a_halted_uninstall_is_deletion_blocked_naming_nodes_and_the_stage() -> None:
    p = progress(
        "Halted",
        message="n1 failed",
        failed=1,
        failed_nodes=("n1",),
    )
    status, reason, message = deleting(derived(p))
    assert (status, reason) == ("True", "DeletionBlocked")
    assert "n1" in message
    assert "uninstall halted" in message
    assert "finalizer stays" in message


def test_a_blocked_uninstall_names_the_blocked_nodes_and_why() -> None:
    p = progress(
        "Blocked", blocked=1, blocked_nodes=("n3",), blocked_reasons={"n3": "drain blocked by PDB web"}
    )
    _, reason, message = deleting(derived(p))
    assert reason == "DeletionBlocked"
    assert "n3: drain blocked by PDB web" in message


def test_no_deleting_condition_without_a_deletion() -> None:
    s = derived(progress("Complete", deleting=False, updated=3), deleting=False)
    assert all(c.type != "Deleting" for c in s.conditions)


def test_deletion_events_started_then_blocked_once() -> None:
    before = derived(progress("Complete", deleting=False, updated=3), deleting=False)
    started = derived(progress("Progressing"), before)
    assert [t.reason for t in transitions(before, started)] == ["DeletionStarted"]
    halted = derive(
        Inputs(
            2, "nodeprofile/p", "careful", progress("Halted", failed_nodes=("n1",), failed=1), deleting=True
        ),
        started,
        T0 + timedelta(minutes=1),
    )
    assert [(t.type, t.reason) for t in transitions(started, halted)] == [("Warning", "DeletionBlocked")]
    assert transitions(halted, halted) == []


# ----- what the clean-up finds --------------------------------------------------------------------
def test_leftovers_name_only_this_profiles_writes() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "annotations": {
                state_key("p"): "{}",
                cordon_key("p"): "true",
                state_key("other"): "{}",
                cordon_key("other"): "true",
            },
            "labels": {status_label_key("p"): "Complete", status_label_key("other"): "Complete"},
        },
        "status": {
            "conditions": [
                {"type": "Ready"},
                {"type": condition_type("p")},
                {"type": unit_wait_condition_type("p")},
                {"type": condition_type("other")},
            ]
        },
    }
    assert leftovers(node, "p") == Leftovers(
        annotations=(state_key("p"),),
        cordon=True,
        label=True,
        conditions=(condition_type("p"), unit_wait_condition_type("p")),
    )
    assert not leftovers({"metadata": {"name": "n2"}}, "p")
