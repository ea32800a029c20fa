"""Pure parts of the node activities: drain rules, node condition status, error conversion, and the
retry-surviving wait clock."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright.activities import drain as drain_module
from fleetwright.activities import nodeprogress
from fleetwright.activities.drain import Blocker, Verdict, blocked_message, disposition
from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import DrainRequest, NodePhase
from fleetwright.activities.waiting import Clock
from fleetwright.api.common import LabelSelector
from fleetwright.api.nodeprofile import DrainSpec
from fleetwright.errors import NotFoundError, PermanentError, RetryableError
from fleetwright.kube import nodestatus
from fleetwright.kube import pods as kube_pods
from fleetwright.kube.eviction import EvictionOutcome, EvictionResult
from fleetwright.kube.nodestatus import NodeFacts
from fleetwright.kube.pods import PodFacts, selector_string

pytestmark = pytest.mark.unit

NS = "fleetwright-system"


def workload(**facts: Any) -> PodFacts:
    base: dict[str, Any] = {"namespace": "team", "name": "p", "uid": "u1", "phase": "Running"}
    base["controller_kind"] = "ReplicaSet"
    return PodFacts(**{**base, **facts})


# ----- drain rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        ({"controller_kind": "DaemonSet"}, "DaemonSet"),
        ({"mirror": True, "controller_kind": None}, "MirrorPod"),
        ({"phase": "Succeeded"}, "Finished"),
        ({"tolerates_unschedulable": True}, "ToleratesUnschedulable"),
        (
            {"namespace": NS, "labels": {"app.kubernetes.io/managed-by": "fleetwright"}},
            "FleetwrightPackagePod",
        ),
    ],
)
def test_pods_the_drain_leaves_in_place(facts: dict[str, Any], reason: str) -> None:
    assert disposition(workload(**facts), DrainSpec(), NS).verdict is Verdict.SKIP
    assert disposition(workload(**facts), DrainSpec(), NS).reason == reason


def test_our_label_outside_our_namespace_is_no_proof() -> None:
    impostor = workload(namespace="team", labels={"app.kubernetes.io/managed-by": "fleetwright"})
    assert disposition(impostor, DrainSpec(), NS).verdict is Verdict.EVICT


def test_unmanaged_and_emptydir_pods_need_explicit_policy() -> None:
    bare = workload(controller_kind=None)
    assert disposition(bare, DrainSpec(), NS) == dataclasses.replace(
        disposition(bare, DrainSpec(), NS), verdict=Verdict.BLOCK, reason="UnmanagedPod"
    )
    assert disposition(bare, DrainSpec(force=True), NS).verdict is Verdict.EVICT
    scratch = workload(uses_empty_dir=True)
    keep_data = DrainSpec.model_validate({"deleteEmptyDirData": False})
    assert disposition(scratch, keep_data, NS).reason == "EmptyDirData"
    assert disposition(scratch, DrainSpec(), NS).verdict is Verdict.EVICT  # default deletes emptyDir data


def test_a_plain_workload_is_evicted() -> None:
    assert disposition(workload(), DrainSpec(), NS).verdict is Verdict.EVICT


def test_blocked_message_names_pods_reasons_and_the_apiserver_words_in_order() -> None:
    message = blocked_message(
        [
            Blocker("b/two", "UnmanagedPod"),
            Blocker("a/one", "PodDisruptionBudget", "The disruption budget web needs 1 healthy pods"),
        ]
    )
    assert message == (
        "a/one: PodDisruptionBudget (The disruption budget web needs 1 healthy pods); b/two: UnmanagedPod"
    )


def test_selector_syntax_covers_every_operator() -> None:
    selector = LabelSelector.model_validate(
        {
            "matchLabels": {"app": "train"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "zone", "operator": "NotIn", "values": ["x"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "spot", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector_string(selector) == "app=train,tier in (a,b),zone notin (x),gpu,!spot"


# ----- node progress ----------------------------------------------------------------------------


def test_condition_status_reads_true_only_when_complete() -> None:
    assert nodeprogress.CONDITION_STATUS[NodePhase.COMPLETE] == "True"
    assert nodeprogress.CONDITION_STATUS[NodePhase.IN_PROGRESS] == "Unknown"
    assert {nodeprogress.CONDITION_STATUS[p] for p in (NodePhase.FAILED, NodePhase.BLOCKED)} == {"False"}


def test_a_stages_record_rides_in_the_patch_of_the_status_that_follows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last stage's record, the Complete label and the dropped start claim are one Node write,
    made before the condition; shown again (a retry), nothing already there is rewritten."""
    node: dict[str, dict[str, str]] = {
        "labels": {"fleetwright.io/p": "InProgress"},
        "annotations": {"fleetwright.io/claim.p": "true"},
    }
    writes: list[tuple[str, Any]] = []

    def read_node(api: object, name: str) -> tuple[NodeFacts, str]:
        return NodeFacts(name, "uid", "boot", True, dict(node["labels"]), dict(node["annotations"])), "1"

    def merge_metadata(api: object, name: str, *, labels: Any = None, annotations: Any = None) -> None:
        writes.append(("metadata", {"labels": labels, "annotations": annotations}))
        node["labels"].update(labels or {})
        for key, value in (annotations or {}).items():
            if value is None:
                node["annotations"].pop(key, None)
            else:
                node["annotations"][key] = value

    monkeypatch.setattr(nodestatus, "read_node", read_node)
    monkeypatch.setattr(nodestatus, "merge_metadata", merge_metadata)
    monkeypatch.setattr(
        nodestatus, "set_condition", lambda api, name, wanted, current: writes.append(("condition", wanted))
    )
    monkeypatch.setattr(nodeprogress, "status_label_key", lambda profile: f"fleetwright.io/{profile}")
    monkeypatch.setattr(nodeprogress, "claim_key", lambda profile: f"fleetwright.io/claim.{profile}")
    record = {"fleetwright.io/state.p": '{"tuning": "1.0.0"}'}

    def show() -> None:
        nodeprogress.publish(
            cast(Any, None),
            profile="p",
            node="n",
            phase=NodePhase.COMPLETE,
            reason="Complete",
            message="done",
            annotations=record,
        )

    show()
    assert [kind for kind, _ in writes] == ["metadata", "condition"]
    assert writes[0][1] == {
        "labels": {"fleetwright.io/p": "Complete"},
        "annotations": {**record, "fleetwright.io/claim.p": None},
    }
    assert node["annotations"] == record
    writes.clear()
    show()
    assert [kind for kind, _ in writes] == ["condition"]  # set_condition itself skips an equal one


# ----- errors and the clock ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind", "non_retryable"),
    [
        (NotFoundError("node gone"), "NotFound", True),
        (PermanentError("bad", reason="InvalidStageJob"), "InvalidStageJob", True),
        (RetryableError("busy", reason="ApiUnavailable"), "ApiUnavailable", False),
    ],
)
async def test_taxonomy_errors_leave_activities_as_typed_application_errors(
    error: Exception, kind: str, non_retryable: bool
) -> None:
    @activity.defn(name="raises")
    @temporal_errors
    async def raises() -> None:
        raise error

    with pytest.raises(ApplicationError) as failure:
        await ActivityEnvironment().run(raises)
    assert failure.value.type == kind
    assert failure.value.non_retryable is non_retryable
    assert str(error) in str(failure.value)


async def test_an_activity_failure_carries_no_chain_of_causes() -> None:
    # An unreachable API server raises through urllib3's retries: with every cause's stack trace
    # the failure passed the Temporal server's size limit and lost its type and message.
    @activity.defn(name="unreachable")
    @temporal_errors
    async def unreachable() -> None:
        try:
            try:
                raise ConnectionRefusedError(111, "Connection refused")
            except OSError as refused:
                raise OSError("Max retries exceeded") from refused
        except OSError as retries:
            raise RetryableError("list nodes: API server unreachable", reason="ApiUnreachable") from retries

    with pytest.raises(ApplicationError) as failure:
        await ActivityEnvironment().run(unreachable)
    assert failure.value.type == "ApiUnreachable"
    assert failure.value.__cause__ is None
    assert failure.value.__suppress_context__


async def test_a_wait_clock_resumes_from_the_previous_attempts_heartbeat() -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_details=[{"started": 1000.0, "held": ["a/b"]}])
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    @activity.defn(name="clock")
    async def measure() -> float:
        clock = Clock(now=lambda: 1042.5)
        clock.beat(step="x")
        return clock.elapsed()

    assert await env.run(measure) == 42.5
    assert beats == [({"started": 1000.0, "step": "x"},)]
    fresh = ActivityEnvironment()
    assert await fresh.run(measure) == 0.0


# ----- drain pacing --------------------------------------------------------------------------


async def test_a_throttled_eviction_waits_for_retry_after_while_heartbeating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The apiserver's Retry-After gates the next eviction; heartbeats continue meanwhile."""
    gone = False
    calls: list[float] = []

    def evict(api: object, namespace: str, name: str, **_: object) -> EvictionOutcome:
        nonlocal gone
        calls.append(time.monotonic())
        if len(calls) == 1:
            return EvictionOutcome(
                namespace, name, EvictionResult.THROTTLED, "slow down", retry_after_seconds=2
            )
        gone = True
        return EvictionOutcome(namespace, name, EvictionResult.ACCEPTED)

    def pods_on_node(api: object, node: str, **_: object) -> tuple[list[PodFacts], str]:
        return ([] if gone else [workload()]), "1"

    def quiet(*_: object, **__: object) -> bool:
        time.sleep(0.1)
        return False

    monkeypatch.setattr(drain_module, "evict", evict)
    monkeypatch.setattr(kube_pods, "pods_on_node", pods_on_node)
    monkeypatch.setattr(kube_pods, "wait_for_node_pods", quiet)
    monkeypatch.setattr(drain_module.Drainer, "_clear", lambda self: asyncio.sleep(0))
    request = DrainRequest(profile="p", node="n", drain=DrainSpec(), poll_seconds=0.2)
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)

    @activity.defn(name="drain")
    async def run() -> Any:
        with ThreadPoolExecutor(2) as executor:
            return await drain_module.Drainer(cast(Any, None), executor, request).run()

    report = await env.run(run)
    assert report.evicted == ("team/p",)
    assert len(calls) == 2
    assert calls[1] - calls[0] >= 2.0
    assert len(beats) >= 5, "heartbeats continue while the eviction waits"
