"""Pure parts of the node activities: drain rules, status key names, stage Job mapping and outcomes,
error conversion, and the retry-surviving wait clock."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fleetwright import stagejob
from fleetwright.activities import drain as drain_module
from fleetwright.activities import status
from fleetwright.activities.drain import Blocker, Verdict, blocked_message, disposition
from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.payloads import DrainRequest, NodePhase, StageOutcome, StageRequest
from fleetwright.activities.stage import (
    config_map_name,
    encode_interrupt,
    job_name,
    job_spec,
    manifest,
    outcome,
)
from fleetwright.activities.waiting import Clock
from fleetwright.agent import interrupts as agent_interrupts
from fleetwright.api.common import LabelSelector
from fleetwright.api.nodeprofile import DrainSpec, Package
from fleetwright.errors import NotFoundError, PermanentError, RetryableError
from fleetwright.kube import pods as kube_pods
from fleetwright.kube.eviction import EvictionOutcome, EvictionResult
from fleetwright.kube.jobs import JobFacts
from fleetwright.kube.jobwatch import PodSucceeded
from fleetwright.kube.pods import ContainerFailure, ContainerWait, PodFacts, selector_string
from fleetwright.planner.interrupts import NO_INTERRUPT, REBOOT, Interrupt, InterruptKind, service_restart
from fleetwright.planner.nodestate import annotation_key
from fleetwright.planner.stages import Stage

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


# ----- status names --------------------------------------------------------------------------


def test_status_keys_fit_63_characters_and_stay_distinct() -> None:
    short = "gpu-tuning"
    assert status.status_label_key(short) == "fleetwright.io/status.gpu-tuning"
    assert status.condition_type(short) == "fleetwright.io/gpu-tuning"
    long_a, long_b = "a" * 80 + "-one", "a" * 80 + "-two"
    for key in (status.status_label_key(long_a), status.condition_type(long_a)):
        name = key.split("/", 1)[1]
        assert len(name) <= 63
        assert name[-1].isalnum()
    assert status.status_label_key(long_a) != status.status_label_key(long_b)
    assert status.status_label_key(long_a) == status.status_label_key(long_a)
    # The same rule as the state annotation, so the three keys of one profile read alike.
    assert annotation_key(long_a).startswith("fleetwright.io/state.aaa")


def test_condition_status_reads_true_only_when_complete() -> None:
    assert status.CONDITION_STATUS[NodePhase.COMPLETE] == "True"
    assert status.CONDITION_STATUS[NodePhase.IN_PROGRESS] == "Unknown"
    assert {status.CONDITION_STATUS[p] for p in (NodePhase.FAILED, NodePhase.BLOCKED)} == {"False"}


# ----- stage Jobs ----------------------------------------------------------------------------


def request(**extra: Any) -> StageRequest:
    package = Package.model_validate(
        {
            "name": "tuning",
            "version": "1.2.0+build.7",
            "image": "ghcr.io/example/tuning",
            "configMap": {"sysctl.conf": "x", "grub.cfg": "y"},
            "env": [{"name": "MODE", "value": "fast"}],
            "resources": {"cpuRequest": "100m", "memoryLimit": "256Mi"},
            "stageTimeoutSeconds": 900,
        }
    )
    base: dict[str, Any] = {
        "profile": "gpu",
        "node": "node-1",
        "profile_uid": "uid",
        "generation": 2,
        "package": package,
        "stage": Stage.CONFIG,
        "agent_image": "ghcr.io/example/agent:1",
    }
    return StageRequest(**{**base, **extra})


@pytest.mark.parametrize(
    ("interrupt", "doc"),
    [
        (REBOOT, {"type": "node_restart"}),
        (
            service_restart("kubelet", "containerd"),
            {"type": "service_restart", "services": ["containerd", "kubelet"]},
        ),
        (Interrupt(kind=InterruptKind.RESTART_ALL_SERVICES), {"type": "restart_all_services"}),
        (Interrupt(kind=InterruptKind.NOOP), {"type": "no_op"}),
    ],
)
def test_interrupts_encode_as_the_agent_decodes_them(interrupt: Interrupt, doc: dict[str, Any]) -> None:
    data = encode_interrupt(interrupt)
    assert json.loads(base64.b64decode(data)) == doc
    decoded = agent_interrupts.decode(data)
    assert decoded.type == doc["type"]
    assert list(decoded.services) == doc.get("services", [])


def test_no_interrupt_cannot_make_an_interrupt_job() -> None:
    with pytest.raises(PermanentError, match="without an interrupt"):
        encode_interrupt(NO_INTERRUPT)
    with pytest.raises(PermanentError, match="needs an interrupt"):
        job_spec(request(stage=Stage.INTERRUPT))


def test_config_map_name_is_lower_cased_and_a_valid_name() -> None:
    assert config_map_name("GPU", "Tuning", "1.2.0+build.7") == "gpu-tuning-1.2.0-build.7"


def test_the_manifest_maps_the_package_and_mounts_each_config_key() -> None:
    rendered = manifest(request(pod_annotations={"a": "b"}, backoff_limit=0, pod_labels={"x": "y"}))
    pod = rendered["spec"]["template"]["spec"]
    copier, work, check = pod["initContainers"]
    assert copier["image"] == "ghcr.io/example/tuning:1.2.0+build.7"
    mounts = [m for m in copier["volumeMounts"] if m["name"] == "package-config"]
    assert mounts == [
        {
            "name": "package-config",
            "mountPath": "/skyhook-package/configmaps/grub.cfg",
            "subPath": "grub.cfg",
        },
        {
            "name": "package-config",
            "mountPath": "/skyhook-package/configmaps/sysctl.conf",
            "subPath": "sysctl.conf",
        },
    ]
    assert {"name": "package-config", "configMap": {"name": "gpu-tuning-1.2.0-build.7"}} in pod["volumes"]
    assert work["args"][0] == "config"
    assert check["args"][0] == "config-check"
    assert work["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}}
    assert work["env"][0] == {"name": "MODE", "value": "fast"}
    assert rendered["spec"]["activeDeadlineSeconds"] == 900
    assert rendered["spec"]["backoffLimit"] == 0
    assert rendered["spec"]["template"]["metadata"]["annotations"] == {"a": "b"}
    assert rendered["spec"]["template"]["metadata"]["labels"]["x"] == "y"


def test_interrupt_jobs_keep_their_unbounded_backoff_and_mount_no_config() -> None:
    rendered = manifest(request(stage=Stage.INTERRUPT, interrupt=REBOOT, backoff_limit=0))
    assert rendered["spec"]["backoffLimit"] == stagejob.INTERRUPT_BACKOFF_LIMIT
    assert all(v["name"] != "package-config" for v in rendered["spec"]["template"]["spec"]["volumes"])


def test_a_later_attempt_gets_a_new_valid_name_and_attempt_zero_keeps_stagejobs() -> None:
    spec = job_spec(request())
    assert job_name(spec, 0) == stagejob.job_name(spec)
    assert manifest(request())["metadata"]["name"] == stagejob.job_name(spec)
    names = {job_name(spec, n) for n in range(4)}
    assert len(names) == 4
    assert all(len(n) <= 63 for n in names)


def test_each_pass_over_a_node_gets_its_own_jobs_and_a_retry_within_a_pass_adopts_its_own() -> None:
    # A node run again at attempt 0 after its records were cleared must not adopt the earlier
    # pass's Complete Jobs (an old interrupt Job meant no reboot, then RebootTimeout).
    spec = job_spec(request())
    first, second = job_name(spec, 0, "run-1"), job_name(spec, 0, "run-2")
    assert first != second
    assert first != job_name(spec, 0)
    assert job_name(spec, 0, "run-1") == first  # an activity retry of the same pass adopts its Job
    assert job_name(spec, 1, "run-1") not in {first, second}
    assert manifest(request(pass_id="run-1"))["metadata"]["name"] == first
    assert all(len(n) <= 63 for n in (first, second))


def test_an_invalid_stage_job_is_a_permanent_error() -> None:
    bad = request(profile="has_underscore")
    with pytest.raises(PermanentError) as failure:
        manifest(bad)
    assert failure.value.reason == "InvalidStageJob"
    assert "profile" in str(failure.value)


NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
BOUND = timedelta(minutes=5)


def test_job_outcomes() -> None:
    complete = JobFacts("ns", "job", finished="Complete", started=NOW, finished_at=NOW)
    assert outcome(complete, [], NOW, BOUND).outcome is StageOutcome.SUCCEEDED  # type: ignore[union-attr]
    deadline = JobFacts("ns", "job", finished="Failed", reason="DeadlineExceeded", message="too slow")
    assert outcome(deadline, [], NOW, BOUND).outcome is StageOutcome.DEADLINE_EXCEEDED  # type: ignore[union-attr]
    failed = JobFacts("ns", "job", finished="Failed", reason="BackoffLimitExceeded", message="limit")
    crashed = PodFacts(
        "ns", "job-x", "u", "Failed", failures=(ContainerFailure("tuning-configcheck", 1, "Error", ""),)
    )
    report = outcome(failed, [crashed], NOW, BOUND)
    assert report is not None
    assert report.outcome is StageOutcome.FAILED
    assert (
        report.message
        == "BackoffLimitExceeded: limit; pod job-x: container tuning-configcheck exited 1 (Error: )"
    )
    assert outcome(JobFacts("ns", "job", active=1, ready=1), [], NOW, BOUND) is None


def test_a_jobs_pod_that_succeeded_is_the_stages_success_before_the_job_is_marked() -> None:
    running = JobFacts("ns", "job", active=1, uid="u1")
    report = outcome(running, [], NOW, BOUND, PodSucceeded(job="job", job_uid="u1", at=NOW))
    assert report is not None
    assert (report.outcome, report.finished_at) == (StageOutcome.SUCCEEDED, NOW)
    earlier = PodSucceeded(job="job", job_uid="u0", at=NOW)  # a Job of the same name, deleted since
    assert outcome(running, [], NOW, BOUND, earlier) is None
    failed = JobFacts("ns", "job", finished="Failed", reason="DeadlineExceeded", message="m", uid="u1")
    late = outcome(failed, [], NOW, BOUND, PodSucceeded(job="job", job_uid="u1", at=NOW))
    assert late is not None
    assert late.outcome is StageOutcome.DEADLINE_EXCEEDED  # the Job's own verdict stands


def test_an_image_pull_is_given_its_bound_then_fails_the_stage() -> None:
    running = JobFacts("ns", "job", active=1)
    wait = ContainerWait("tuning-init", "ImagePullBackOff", "Back-off pulling image", "ghcr.io/x:1")
    young = PodFacts("ns", "job-x", "u", created=NOW - BOUND + timedelta(seconds=1), waits=(wait,))
    assert outcome(running, [young], NOW, BOUND) is None
    old = dataclasses.replace(young, created=NOW - BOUND)
    report = outcome(running, [old], NOW, BOUND)
    assert report is not None
    assert report.outcome is StageOutcome.IMAGE_PULL_FAILED
    assert "ghcr.io/x:1" in report.message
    assert "ImagePullBackOff" in report.message
    # Any other wait (a slow init, a crash loop) is not a pull failure.
    busy = dataclasses.replace(old, waits=(ContainerWait("tuning-init", "PodInitializing", ""),))
    assert outcome(running, [busy], NOW, BOUND) is None


def test_an_adopted_job_carrying_a_pull_verdict_reports_it_again() -> None:
    noted = JobFacts(
        "ns",
        "job",
        suspended=True,
        annotations={"fleetwright.io/outcome": "ImagePullFailed", "fleetwright.io/outcome-message": "m"},
    )
    report = outcome(noted, [], NOW, BOUND)
    assert report is not None
    assert (report.outcome, report.message) == (StageOutcome.IMAGE_PULL_FAILED, "m")


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
