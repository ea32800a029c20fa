"""Abort is durable for a profile's generation: the controller does not restart a rollout whose
last run ended Aborted at the profile's current generation (a controller restart re-lists every
profile and would otherwise undo the abort); a new generation or an explicit resume starts it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from fleetwright.api.keys import PAUSED_ANNOTATION
from fleetwright.controller import reconcile as controller_module
from fleetwright.controller.reconcile import Controller, ControllerOptions
from fleetwright.kube.client import ApiClient
from fleetwright.local import examples
from fleetwright.process.settings import WorkerSettings
from fleetwright.workflows.payloads import Progress, RolloutInput
from fleetwright.workflows.rollout import ABORTED

pytestmark = pytest.mark.unit

NAME = "tuning"


@dataclass
class Description:
    status: WorkflowExecutionStatus
    progress: Progress

    async def memo_value(self, key: str, default: Any = None, *, type_hint: Any = None) -> Any:
        assert key == "progress"
        return self.progress


@dataclass
class FakeTemporal:
    """The client calls the controller makes: describe the last run, start, signal."""

    last: Description | None = None
    started: list[RolloutInput] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)

    def get_workflow_handle(self, workflow_id: str) -> FakeTemporal:
        return self

    async def describe(self) -> Description:
        if self.last is None:
            raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")
        return self.last

    async def start_workflow(self, run: Any, rollout: RolloutInput, **options: Any) -> FakeTemporal:
        self.started.append(rollout)
        return self

    async def signal(self, signal: Any, arg: Any = None) -> None:
        self.signals.append(getattr(signal, "__name__", str(signal)))


def aborted_at(generation: int) -> Description:
    progress = Progress(profile=NAME, phase=ABORTED, message="aborted", generation=generation)
    return Description(status=WorkflowExecutionStatus.COMPLETED, progress=progress)


def profile_obj(generation: int, *, paused: bool = False) -> dict[str, Any]:
    body = examples.profile(NAME, generation=generation).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    body["spec"].pop("deploymentPolicyRef", None)  # the built-in policy: no DeploymentPolicy to list
    if paused:
        body["metadata"].setdefault("annotations", {})[PAUSED_ANNOTATION] = "true"
    return body


@pytest.fixture
def temporal(monkeypatch: pytest.MonkeyPatch) -> FakeTemporal:
    # The finalizer is the API server's business; here it is already held.
    monkeypatch.setattr(controller_module, "add_finalizer", lambda api, plural, obj, finalizer: obj)
    return FakeTemporal()


def controller(temporal: FakeTemporal) -> Controller:
    fake_client: Any = temporal
    no_api: Any = None
    client: Client = fake_client
    api: ApiClient = no_api
    return Controller(client, api, WorkerSettings(), ControllerOptions())


async def test_a_restarted_controller_leaves_a_rollout_aborted_at_this_generation_ended(
    temporal: FakeTemporal,
) -> None:
    temporal.last = aborted_at(3)
    restarted = controller(temporal)
    restarted.profiles[NAME] = profile_obj(3)
    await restarted._reconcile(NAME)
    assert temporal.started == []
    assert temporal.signals == []
    await restarted._reconcile(NAME)  # the periodic resync: still nothing
    assert temporal.started == []


async def test_a_new_generation_starts_an_aborted_rollout_again(temporal: FakeTemporal) -> None:
    temporal.last = aborted_at(3)
    running = controller(temporal)
    running.profiles[NAME] = profile_obj(3)
    await running._reconcile(NAME)
    assert temporal.started == []
    running.profiles[NAME] = profile_obj(4)  # a spec edit
    await running._reconcile(NAME)
    assert [r.profile.metadata.generation for r in temporal.started] == [4]


async def test_an_explicit_resume_starts_an_aborted_rollout_again(temporal: FakeTemporal) -> None:
    temporal.last = aborted_at(3)
    running = controller(temporal)
    running.profiles[NAME] = profile_obj(3, paused=True)
    await running._reconcile(NAME)
    assert temporal.started == []
    running.profiles[NAME] = profile_obj(3)  # the paused annotation cleared
    await running._reconcile(NAME)
    assert len(temporal.started) == 1
    assert not temporal.started[0].controls.paused


async def test_a_profile_without_an_aborted_run_is_started(temporal: FakeTemporal) -> None:
    restarted = controller(temporal)
    restarted.profiles[NAME] = profile_obj(3)
    await restarted._reconcile(NAME)
    assert len(temporal.started) == 1
    temporal.last = Description(
        status=WorkflowExecutionStatus.RUNNING,
        progress=Progress(profile=NAME, phase=ABORTED, message="aborting", generation=3),
    )
    again = controller(temporal)  # still running (its nodes finish): USE_EXISTING finds it
    again.profiles[NAME] = profile_obj(3)
    await again._reconcile(NAME)
    assert len(temporal.started) == 2


def policy_obj(generation: int) -> dict[str, Any]:
    body = examples.policy("careful").model_dump(mode="json", by_alias=True, exclude_none=True)
    body["metadata"]["generation"] = generation
    return body


async def test_a_policy_only_edit_leaves_an_aborted_rollout_aborted(temporal: FakeTemporal) -> None:
    # Abort stops the profile's rollout, not one policy version of it: an edit of the referenced
    # DeploymentPolicy (which may pace many profiles) is no decision to roll this one out again.
    temporal.last = aborted_at(3)
    running = controller(temporal)
    with_policy = examples.profile(NAME, generation=3).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    running.profiles[NAME] = with_policy
    running.policies["careful"] = policy_obj(1)
    await running._reconcile(NAME)
    running.policies["careful"] = policy_obj(2)  # maxUnavailable, steps... edited
    await running._reconcile(NAME)
    assert temporal.started == []
    assert temporal.signals == []
    running.profiles[NAME] = {**with_policy, "metadata": {**with_policy["metadata"], "generation": 4}}
    await running._reconcile(NAME)  # the profile's own spec changes: that is a new rollout
    assert [r.profile.metadata.generation for r in temporal.started] == [4]
