"""An in-memory fleet behind the activity names, for workflow-tier tests on the time-skipping
server. It implements each activity's contract on plain Node dicts (the observe-and-decide turn
runs the real pure planner via ``plan_turn``), and lets a test hold stages open to pause, abort
or inspect the rollout mid-flight. Real Kubernetes behaviour is the integration tier's job."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from fleetwright.activities.health import changed_nodes, external_verdict, measure_fleet
from fleetwright.activities.health import measure as measure_once
from fleetwright.activities.images import ImageResolver
from fleetwright.activities.nodeprogress import ends_claim
from fleetwright.activities.payloads import (
    NAMES,
    ChangedNodesMeasureRequest,
    CleanupReport,
    CleanupRequest,
    CordonReport,
    CordonRequest,
    DecideReport,
    DecideRequest,
    DrainReport,
    DrainRequest,
    ExternalVerdict,
    ExternalWaitRequest,
    MeasureRequest,
    NodePhase,
    NodeStatusRequest,
    NodeTarget,
    ProtectedPodsRequest,
    RecordStateRequest,
    RuntimeTaintReport,
    StageRequest,
    StagesReport,
    StagesRequest,
    StatusNote,
    UncordonRequest,
    ValidationRequest,
)
from fleetwright.activities.report import send as send_report
from fleetwright.activities.rollout import cleared_failure, plan_turn
from fleetwright.activities.stages import resume_index, run_stages
from fleetwright.activities.starts import NodeStarter
from fleetwright.api.health import nodes_alternation
from fleetwright.api.keys import (
    NodeReason,
    claim_key,
    condition_type,
    cordon_key,
    state_key,
    unit_wait_condition_type,
)
from fleetwright.errors import NotFoundError, PrometheusUnavailableError
from fleetwright.kube import nodestatus
from fleetwright.local import nodes as fleet_nodes
from fleetwright.planner.health.analysis import Measurement
from fleetwright.planner.node.state import format_annotation
from fleetwright.planner.rollout.observations import NodeWorkload
from fleetwright.registry import ImageNotFoundError, ImageUnresolvedError, is_pinned, parse_reference
from fleetwright.signatures import SignatureLayer
from fleetwright.stagejob.outcome import StageOutcome, StageReport
from fleetwright.stagejob.request import manifest
from fleetwright.stagejob.validation import ValidationReport, job_name, tail_of, verdict


@dataclass
class FakeRegistry:
    """Tags and their digests in memory: a tag not pushed here names ``sha256(reference)``."""

    tags: dict[str, str] = field(default_factory=dict)
    """reference -> digest, for the references a test pushed (or re-pushed)."""
    missing: set[str] = field(default_factory=set)
    """References the registry says do not exist."""
    reachable: bool = True
    asked: list[str] = field(default_factory=list)
    """Every reference resolved, in order (references given by digest never reach it)."""

    signed: dict[str, tuple[SignatureLayer, ...]] = field(default_factory=dict)
    """digest -> the cosign signature layers its ``.sig`` tag holds (none: unsigned)."""

    def signatures(self, pinned: str) -> tuple[SignatureLayer, ...]:
        return self.signed.get(pinned.partition("@")[2], ())

    def push(self, reference: str, content: str) -> str:
        digest = "sha256:" + hashlib.sha256(content.encode()).hexdigest()
        self.tags[reference] = digest
        return digest

    def resolve(self, reference: str) -> str:
        if is_pinned(reference):
            return reference
        self.asked.append(reference)
        if not self.reachable:
            raise ImageUnresolvedError(f"{reference}: registry.test unreachable: NewConnectionError")
        if reference in self.missing:
            raise ImageNotFoundError(f"{reference}: the registry has no such manifest")
        digest = self.tags.get(reference) or "sha256:" + hashlib.sha256(reference.encode()).hexdigest()
        return f"{parse_reference(reference).name}@{digest}"


@dataclass
class FakeFleet:
    size: int
    failing_nodes: set[str] = field(default_factory=set)
    fails: Callable[[StageRequest], bool] | None = None
    """Also fail the stages this says fail (the failing nodes' always do)."""
    stage_requests: list[StageRequest] = field(default_factory=list)
    hold_stages: bool = False
    held_profiles: set[str] = field(default_factory=set)
    """Profiles whose stages are held (until ``release``) whatever ``hold_stages`` says."""
    holds: Callable[[StageRequest], bool] | None = None
    """Also hold the stages this says hold (until ``release``)."""
    nodes: dict[str, dict[str, Any]] = field(init=False)
    started_stages: list[tuple[str, str]] = field(default_factory=list)
    uncordoned: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    shown: list[tuple[str, str, str]] = field(default_factory=list)
    """(profile, node, reason) of every status shown, in order: profiles sharing a node overwrite
    each other's last reason."""
    notes: list[tuple[str, StatusNote]] = field(default_factory=list)
    """(node, status) of every status shown, in order."""
    max_cordoned: int = 0
    cordoned_sets: list[frozenset[str]] = field(default_factory=list)
    """The cordoned nodes after each cordon, in order (caps per group of nodes)."""
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cleaned_up: list[CleanupRequest] = field(default_factory=list)
    untainted: list[str] = field(default_factory=list)
    rebooted: list[str] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)
    cordoned_at_stages: list[tuple[str, str, bool]] = field(default_factory=list)
    """(node, stage, whether the node was unschedulable when the stage began), in order."""
    recorded_by: list[tuple[str, str]] = field(default_factory=list)
    metric: Callable[[str, str], Any] | None = None
    """(node, rendered PromQL) -> Prometheus' JSON answer for a health check's query (raise a
    taxonomy error for an unreachable or refusing Prometheus); None: every check answers 0."""
    measured: list[tuple[str, str, bool]] = field(default_factory=list)
    """(node, check, whether the node was cordoned) of every measurement taken, in order."""
    fleet_measured: list[Measurement] = field(default_factory=list)
    """Every fleet-gate measurement the decisions took, in order."""
    gate_measured: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    """(check, the nodes measured) of every campaign fleet-gate measurement, in order."""
    hold_measurements: asyncio.Event | None = None
    """When set, a measurement waits for this event before it answers."""
    """(node, the activity type that wrote a package state record), in order."""
    validation_exit: Callable[[ValidationRequest], tuple[int, str]] | None = None
    """(exit code, output) of a validation container; None: every one exits 0."""
    validation_jobs: dict[str, int] = field(default_factory=dict)
    """Job name -> how many times a Job of that name was created (adoption leaves it at 1)."""
    validated: list[tuple[str, str, int, bool]] = field(default_factory=list)
    """(node, validation, activity attempt, whether the node was cordoned) of every run, in order."""
    hold_validations: asyncio.Event | None = None
    """When set, a validation's Job runs until this event is set."""
    registry: FakeRegistry = field(default_factory=FakeRegistry)
    """What the resolve-images activity asks (the real activity on a fake registry)."""
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    """``namespace/name`` -> the entries of a Secret the activities read (signature keys)."""
    workloads: dict[str, tuple[NodeWorkload, ...]] | None = None
    """node -> the workloads running there, as the rollout activity reads them from the pods."""

    def __post_init__(self) -> None:
        self.nodes = {}
        for node in fleet_nodes.fleet(self.size):
            node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            self.nodes[node["metadata"]["name"]] = node

    # ---- helpers for assertions ----
    def stage_images(self) -> set[str]:
        """Every container image of every stage Job the fleet was asked to run."""
        images: set[str] = set()
        for request in self.stage_requests:
            pod = manifest(request)["spec"]["template"]["spec"]
            images |= {c["image"] for c in pod.get("initContainers", []) + pod["containers"]}
        return images

    def cordoned(self) -> set[str]:
        return {n for n, node in self.nodes.items() if node["spec"].get("unschedulable")}

    def started_nodes(self) -> list[str]:
        return sorted({node for node, _ in self.started_stages})

    def annotations(self, node: str) -> dict[str, str]:
        meta: dict[str, Any] = self.nodes[node]["metadata"]
        result: dict[str, str] = meta.setdefault("annotations", {})
        return result

    def secret(self, namespace: str, name: str) -> dict[str, str]:
        if f"{namespace}/{name}" not in self.secrets:
            raise NotFoundError(f"secret {namespace}/{name} does not exist")
        return self.secrets[f"{namespace}/{name}"]

    # ---- activities ----
    @activity.defn(name=NAMES.OBSERVE_AND_DECIDE)
    async def observe_and_decide(self, request: DecideRequest) -> DecideReport:
        for node in request.reset_failed:
            cleared = cleared_failure(self.annotations(node), request.profile.metadata.name)
            if cleared is not None:
                key, value = cleared
                self.annotations(node)[key] = value
        profile = request.profile.metadata.name
        for node in request.release_claims:
            self.annotations(node).pop(claim_key(profile), None)
        for result in request.ended:
            await self._show(
                NodeTarget(profile=profile, node=result.node),
                StatusNote(phase=NodePhase.FAILED, reason=NodeReason.WORKFLOW_ENDED, message=result.message),
            )
        measured = measure_fleet(_FakePrometheus(self, ""), request.state, request.now)
        self.fleet_measured.extend(m.measurement for m in measured)
        turn = plan_turn(list(self.nodes.values()), request, workloads=self.workloads, measured=measured)
        for start in turn.report.decision.start:  # claimed as the real activity does
            self.annotations(start.node)[claim_key(profile)] = "true"
        for node, condition in turn.unit_waits.items():  # shown as the real activity does
            self._put_condition(node, unit_wait_condition_type(profile), condition)
        return turn.report

    @activity.defn(name=NAMES.CORDON)
    async def cordon(self, target: CordonRequest) -> CordonReport:
        await self._show(target, target.show_before)
        node = self.nodes[target.node]
        if node["spec"].get("unschedulable") and cordon_key(target.profile) not in self.annotations(
            target.node
        ):
            return CordonReport(ours=False, foreign=True)
        node["spec"]["unschedulable"] = True
        self.annotations(target.node)[cordon_key(target.profile)] = "true"
        self.cordoned_sets.append(frozenset(self.cordoned()))
        self.max_cordoned = max(self.max_cordoned, len(self.cordoned_sets[-1]))
        return CordonReport(ours=True, foreign=False)

    @activity.defn(name=NAMES.UNCORDON)
    async def uncordon(self, target: UncordonRequest) -> bool:
        if self.annotations(target.node).pop(cordon_key(target.profile), None) is None:
            lifted = False
        else:
            self.nodes[target.node]["spec"].pop("unschedulable", None)
            self.uncordoned.append(target.node)
            lifted = True
        await self._show(target, target.show_after)
        return lifted

    @activity.defn(name=NAMES.WAIT_PROTECTED_PODS)
    async def wait_protected_pods(self, request: ProtectedPodsRequest) -> None:
        return None

    @activity.defn(name=NAMES.DRAIN)
    async def drain(self, request: DrainRequest) -> DrainReport:
        self.drained.append(request.node)
        return DrainReport()

    @activity.defn(name=NAMES.RUN_STAGES)
    async def run_stages(self, request: StagesRequest) -> StagesReport:
        """The real loop over the stages (resume, cancellation between stages) around the fake
        stage below."""
        recorded = self.annotations(request.node).get(state_key(request.profile))
        resumed = resume_index(request, recorded) if activity.info().attempt > 1 else 0
        return await run_stages(request, self.run_stage, resumed)

    async def run_stage(self, request: StageRequest) -> StageReport:
        await self._show(request, request.show_before)
        self.started_stages.append((request.node, request.stage.value))
        self.stage_requests.append(request)
        unschedulable = bool(self.nodes[request.node]["spec"].get("unschedulable"))
        self.cordoned_at_stages.append((request.node, request.stage.value, unschedulable))
        held = self.holds is not None and self.holds(request)
        if self.hold_stages or request.profile in self.held_profiles or held:
            await self.release.wait()
        if request.node in self.failing_nodes or (self.fails is not None and self.fails(request)):
            return StageReport(job=f"job-{request.node}", outcome=StageOutcome.FAILED, message="exit code 1")
        if request.reboot_timeout_seconds is not None:
            self.reboot(request.node)
        if request.record is not None:
            await self.record_state(
                RecordStateRequest(profile=request.profile, node=request.node, state=request.record)
            )
        await self._show(request, request.show_after)
        return StageReport(job=f"job-{request.node}", outcome=StageOutcome.SUCCEEDED)

    def reboot(self, node: str) -> str:
        new = fleet_nodes.boot_id(node, generation=1)
        self.nodes[node]["status"]["nodeInfo"]["bootID"] = new
        self.rebooted.append(node)
        return new

    async def _show(self, target: NodeTarget, note: StatusNote | None) -> None:
        """Show ``note``, then send its report as the real activities do."""
        if note is not None:
            self.statuses[target.node] = note.phase.value
            self.reasons[target.node] = note.reason
            self.messages[target.node] = note.message
            self.shown.append((target.profile, target.node, note.reason))
            self.notes.append((target.node, note))
            self._set_condition(target, note)
            if ends_claim(note.phase, note.reason):
                self.annotations(target.node).pop(claim_key(target.profile), None)
            await send_report(note.report)

    def _set_condition(self, target: NodeTarget, note: StatusNote) -> None:
        """The profile's node condition, as the real status activity writes it (its reason is
        what the planner reads back, e.g. a failed health gate)."""
        kind = condition_type(target.profile)
        self._put_condition(
            target.node, kind, nodestatus.NodeStatusCondition(kind, "True", note.reason, note.message)
        )

    def _put_condition(self, name: str, kind: str, condition: nodestatus.NodeStatusCondition | None) -> None:
        """Replace the node's condition ``kind`` by ``condition`` (None: remove it)."""
        node = self.nodes.get(name)
        if node is None:
            return
        conditions = [c for c in node["status"].get("conditions") or [] if c.get("type") != kind]
        if condition is not None:
            c = condition
            conditions.append({"type": kind, "status": c.status, "reason": c.reason, "message": c.message})
        node["status"]["conditions"] = conditions

    @activity.defn(name=NAMES.RECORD_STATE)
    async def record_state(self, request: RecordStateRequest) -> None:
        self.recorded_by.append((request.node, activity.info().activity_type))
        key, value = format_annotation(request.state)
        self.annotations(request.node)[key] = value

    @activity.defn(name=NAMES.SET_NODE_STATUS)
    async def set_node_status(self, request: NodeStatusRequest) -> None:
        note = StatusNote(
            phase=request.phase, reason=request.reason, message=request.message, report=request.report
        )
        await self._show(NodeTarget(profile=request.profile, node=request.node), note)

    @activity.defn(name=NAMES.MEASURE)
    async def measure(self, request: MeasureRequest) -> Measurement:
        await self._show(request, request.show_before)
        if self.hold_measurements is not None:
            await self.hold_measurements.wait()
        cordoned = bool(self.nodes[request.node]["spec"].get("unschedulable"))
        self.measured.append((request.node, request.check.name, cordoned))
        return measure_once(_FakePrometheus(self, request.node), request)

    @activity.defn(name=NAMES.MEASURE_CHANGED)
    async def measure_changed(self, request: ChangedNodesMeasureRequest) -> Measurement:
        """A campaign's fleet-gate measurement over the nodes the profile changed (the real
        ``changed_nodes``), answered by ``metric`` (its node argument empty)."""
        changed = changed_nodes(self.nodes.values(), request.profile)
        self.gate_measured.append((request.check.name, tuple(changed)))
        values = {"nodes": nodes_alternation(changed), "profile": request.profile, "node": ""}
        measured = MeasureRequest(profile=request.profile, node="", check=request.check, placeholders=values)
        return measure_once(_FakePrometheus(self, ""), measured)

    @activity.defn(name=NAMES.RUN_VALIDATION)
    async def run_validation(self, request: ValidationRequest) -> ValidationReport:
        """Creates the Job the real renderer names, or adopts it when it exists (409)."""
        await self._show(request, request.show_before)
        name = job_name(request)
        if name not in self.validation_jobs:
            self.validation_jobs[name] = 1
        cordoned = bool(self.nodes[request.node]["spec"].get("unschedulable"))
        self.validated.append((request.node, request.validation.name, activity.info().attempt, cordoned))
        if self.hold_validations is not None:
            while not self.hold_validations.is_set():
                activity.heartbeat()
                await asyncio.sleep(0.1)
        code, log = self.validation_exit(request) if self.validation_exit is not None else (0, "")
        outcome = StageOutcome.SUCCEEDED if code == 0 else StageOutcome.FAILED
        report = StageReport(job=name, outcome=outcome, message="" if code == 0 else "BackoffLimitExceeded")
        return verdict(request, report, code, tail_of(log))

    @activity.defn(name=NAMES.WAIT_EXTERNAL)
    async def wait_external(self, request: ExternalWaitRequest) -> ExternalVerdict:
        """Polls the fake node for the validator's verdict (the real activity watches the Node)."""
        validator = request.validator
        loop = asyncio.get_running_loop()
        deadline = loop.time() + validator.timeout_seconds
        while True:
            listed = self.nodes[request.node]["status"].get("conditions", [])
            facts = nodestatus.NodeFacts(
                request.node,
                "uid",
                "boot",
                True,
                annotations=dict(self.annotations(request.node)),
                conditions={
                    c["type"]: nodestatus.NodeStatusCondition(
                        c["type"], c["status"], message=c.get("message", "")
                    )
                    for c in listed
                },
                transitions={c["type"]: c.get("lastTransitionTime", "") for c in listed},
            )
            verdict = external_verdict(validator, facts, request.since.isoformat())
            if verdict is not None:
                if validator.annotation is not None:
                    self.annotations(request.node).pop(validator.annotation, None)
                return verdict
            if loop.time() >= deadline:
                return ExternalVerdict(validator=validator.name, passed=False, message="no verdict (timeout)")
            activity.heartbeat()
            await asyncio.sleep(0.1)

    @activity.defn(name=NAMES.CLEAN_UP)
    async def clean_up(self, request: CleanupRequest) -> CleanupReport:
        self.cleaned_up.append(request)
        cleaned = []
        for name in self.nodes:
            annotations = self.annotations(name)
            had_cordon = cordon_key(request.profile) in annotations
            if had_cordon:
                await self.uncordon(UncordonRequest(profile=request.profile, node=name))
            if annotations.pop(state_key(request.profile), None) is not None or had_cordon:
                cleaned.append(name)
            self.statuses.pop(name, None)
        return CleanupReport(nodes=tuple(cleaned))

    @activity.defn(name=NAMES.RELEASE_RUNTIME_TAINT)
    async def release_runtime_taint(self, target: NodeTarget) -> RuntimeTaintReport:
        self.untainted.append(target.node)
        return RuntimeTaintReport(removed=True)

    def activities(self) -> list[Any]:
        return [
            self.observe_and_decide,
            ImageResolver(self.registry, self.secret).resolve_images,
            self.cordon,
            self.uncordon,
            self.wait_protected_pods,
            self.drain,
            self.run_stages,
            self.record_state,
            self.set_node_status,
            self.clean_up,
            self.release_runtime_taint,
            self.measure,
            self.measure_changed,
            self.wait_external,
            self.run_validation,
            # The real ones: they start and look up node workflows on the test server.
            NodeStarter().start_nodes,
            NodeStarter().ended_nodes,
        ]


ZERO = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0, "0"]}]}}


@dataclass
class _FakePrometheus:
    """The fleet's answer to one node's queries, in place of an HTTP server."""

    fleet: FakeFleet
    node: str

    def query(self, promql: str) -> Any:
        return ZERO if self.fleet.metric is None else self.fleet.metric(self.node, promql)


def answer(*values: float) -> dict[str, Any]:
    """Prometheus' instant-vector answer with one series per value (none: no data)."""
    result = [{"metric": {"gpu": str(i)}, "value": [0, str(v)]} for i, v in enumerate(values)]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


@dataclass
class Outage:
    """A fake fleet's ``metric``: a Prometheus that does not answer (``error``) while ``down``,
    then answers 0."""

    error: str = "unreachable: MaxRetryError"
    down: bool = True

    def __call__(self, node: str, promql: str) -> Any:
        if self.down:
            raise PrometheusUnavailableError(f"Prometheus at http://127.0.0.1:1 {self.error}")
        return answer(0)


FLEET_XID = {
    "name": "fleet-xid",
    "query": 'sum(changes(DCGM_FI_DEV_XID_ERRORS{Hostname=~"{{nodes}}"}[5m]))',
    "successCondition": "result[0] == 0",
    "failureCondition": "result[0] > 0",
    "count": 3,
    "intervalSeconds": 1,
}


def xid_from_the_second(seen: list[str]) -> Callable[[str, str], Any]:
    """A fake fleet's ``metric`` that records each query in ``seen`` and answers 0 to the first
    measurement, an XID (2) from the second on."""

    def metric(node: str, promql: str) -> Any:
        seen.append(promql)
        return answer(2) if len(seen) >= 2 else answer(0)

    return metric
