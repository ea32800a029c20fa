"""The rollout's activity: observe the fleet and run the pure planner on it.

It reads every Node once, keeps those the profile targets (minus skipped ones), folds in what the
workflow learned from its node workflows, marks nodes where an earlier-priority profile is not
complete yet, on the node or, for ``sequencing: all``, on any of its nodes (``planner.profile.priority``;
it reads the NodeProfiles for that), attaches the workloads whose pods run on each node (for the
order) and the pods the policy's ``workloadWait`` waits for (``kube.workloads``; one list of the
bound pods, made only when the policy reads pods: ``RolloutPolicy.reads_pods``), and calls
``planner.rollout.decision.decide`` with the workflow's ``now``. The decision is recorded in history, so the
workflow stays deterministic while the fleet read stays out of it. Once its starts are claimed it
shows the decision's unit waits as node conditions (``unitwaits``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.client import Interceptor

from fleetwright.activities import nodeprogress, unitwaits
from fleetwright.activities.drain import DRAIN_WAIT_REASONS
from fleetwright.activities.errors import temporal_errors
from fleetwright.activities.health import measure_fleet
from fleetwright.activities.images import ImageResolver
from fleetwright.activities.payloads import NAMES, DecideReport, DecideRequest, NodePhase, NodeResult
from fleetwright.activities.starts import NodeStarter
from fleetwright.activities.unitwaits import unit_wait_changes
from fleetwright.api.keys import CLAIM_PREFIX, NodeReason, claim_key, condition_type, unit_wait_condition_type
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.api.nodeprofile import NodeProfile, parse_profiles
from fleetwright.errors import InvalidSpecError, NotFoundError, RetryableError
from fleetwright.kube import nodes as kube_nodes
from fleetwright.kube import nodestatus, resources, secrets
from fleetwright.kube import workloads as kube_workloads
from fleetwright.kube.client import ApiClient
from fleetwright.kube.nodestatus import NodeStatusCondition
from fleetwright.planner import convert
from fleetwright.planner.health.analysis import ScopedMeasurement
from fleetwright.planner.node.state import format_annotation, read_profile_state
from fleetwright.planner.policy.model import RolloutPolicy
from fleetwright.planner.profile.priority import (
    earlier_profiles,
    fleet_completion,
    sequencing_hold,
    waiting_on,
)
from fleetwright.planner.rollout.decision import decide
from fleetwright.planner.rollout.observations import NodeObservation, NodeWorkload, Observations, RunStatus
from fleetwright.planner.rollout.snapshot import observe_node
from fleetwright.planner.rollout.state import BlockedNode, RolloutState
from fleetwright.planner.rollout.targets import Prepared
from fleetwright.prometheus import Prometheus, PrometheusAccess, Querier
from fleetwright.registry import Registry, RegistryAccess

# Concurrent claim and release patches of one decision (the apiserver serves them in parallel).
PATCH_THREADS = 16


def _run_status(
    observation: NodeObservation, state: RolloutState, results: Mapping[str, NodeResult]
) -> NodeObservation:
    """Attach this profile's node-workflow status: running nodes stay running until they report. A
    node started for this target takes only a report towards it: a report sent again by a retried
    activity of an earlier target's run is not its own."""
    own = {r.node for r in state.running}
    if observation.name not in own and observation.name not in state.running_for_earlier_target:
        return observation
    result = results.get(observation.name)
    if result is None or (observation.name in own and result.target != state.spec.target):
        return observation.model_copy(update={"run": RunStatus.RUNNING})
    update = {"run": result.status, "message": result.message, "spared": result.spared}
    return observation.model_copy(update=update)


def _identity(node: Mapping[str, Any]) -> tuple[str, Mapping[str, str], Mapping[str, str]]:
    meta = node.get("metadata") or {}
    return str(meta.get("name")), meta.get("labels") or {}, meta.get("annotations") or {}


def observe(
    nodes: list[dict[str, Any]],
    request: DecideRequest,
    profiles: Iterable[NodeProfile] = (),
    workloads: Mapping[str, tuple[NodeWorkload, ...]] | None = None,
    finishing: Mapping[str, tuple[str, ...]] | None = None,
) -> tuple[Observations, dict[str, NodeObservation]]:
    """Pure: the planner's observations from raw Nodes, the workflow's request, every NodeProfile
    (for the priority order on shared nodes), the workloads on each node and the pods the policy's
    ``workloadWait`` waits for there (``kube.workloads``; None: not known)."""
    profile = request.profile
    skipped = set(request.controls.skipped)
    results = {r.node: r for r in request.results}
    earlier = earlier_profiles(profile, profiles)
    incomplete = (
        fleet_completion(earlier, (_identity(node) for node in nodes))
        if earlier and profile.spec.sequencing == "all"
        else ()
    )
    observed: dict[str, NodeObservation] = {}
    for node in nodes:
        name, labels, annotations = _identity(node)
        if name in skipped or not convert.targets(profile, labels):
            continue
        observation = _run_status(observe_node(node, profile.metadata.name), request.state, results)
        waiting = waiting_on(earlier, labels, annotations) if earlier else ()
        hold = sequencing_hold(profile, incomplete, labels)
        if waiting or hold:
            observation = observation.model_copy(update={"waiting_on": waiting, "sequencing_hold": hold})
        if workloads and name in workloads:
            observation = observation.model_copy(update={"workloads": workloads[name]})
        if finishing and name in finishing:
            observation = observation.model_copy(update={"finishing": finishing[name]})
        observed[name] = observation
    observations = Observations(
        nodes=tuple(observed[n] for n in sorted(observed)),
        approvals=request.controls.approvals,
        rollback=request.controls.rollback,
        # An aborted rollout starts nothing more, like a paused one (its running nodes finish).
        paused=request.controls.paused or request.controls.aborted,
    )
    return observations, observed


# This profile's node-condition reasons for a node workflow held in a wait (status False): the node
# runs, yet the rollout is blocked on it until the wait clears, so progress counts it as blocked.
HELD_WAIT_REASONS = frozenset(
    {
        *DRAIN_WAIT_REASONS,
        NodeReason.PROTECTED_PODS_RUNNING,
        NodeReason.IMAGE_PULL_WAITING,
        NodeReason.MONITORING_UNAVAILABLE,
    }
)


def held_waits(
    nodes: Iterable[Mapping[str, Any]], profile: str, running: Iterable[str]
) -> tuple[BlockedNode, ...]:
    """Pure: the running nodes whose node condition for this profile shows a held wait, with
    ``<reason>: <message>`` (the drain's message names the pod and the PodDisruptionBudget)."""
    busy = set(running)
    wanted = condition_type(profile)
    held: list[BlockedNode] = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        if name not in busy:
            continue
        condition = nodestatus.listed_condition(node, wanted)
        if condition is not None and condition.status == "False" and condition.reason in HELD_WAIT_REASONS:
            held.append(BlockedNode(node=name, reason=f"{condition.reason}: {condition.message}"))
    return tuple(sorted(held, key=lambda b: b.node))


@dataclass(frozen=True)
class Turn:
    """One turn's decision and what its nodes must show of it."""

    report: DecideReport
    unit_waits: dict[str, NodeStatusCondition | None]
    """node -> the unit-wait condition it must carry now (None: none), where that changed
    (``unitwaits.unit_wait_changes``)."""


def plan_turn(
    nodes: list[dict[str, Any]],
    request: DecideRequest,
    profiles: Iterable[NodeProfile] = (),
    workloads: Mapping[str, tuple[NodeWorkload, ...]] | None = None,
    finishing: Mapping[str, tuple[str, ...]] | None = None,
    *,
    measured: tuple[ScopedMeasurement, ...] = (),
) -> Turn:
    """Pure: one turn of the rollout from raw Nodes — observe, decide, what new nodes need and
    which nodes' unit-wait conditions change; ``measured``: the fleet-gate measurements taken for it."""
    observations, observed = observe(nodes, request, profiles, workloads, finishing)
    if measured:
        observations = observations.model_copy(update={"fleet_measurements": measured})
    prepared = Prepared(request.state.spec, observations)
    decision = decide(request.state, observations, request.now, prepared)
    first = len(request.state.updated) + len(request.state.failed) + len(request.state.running)
    profile = request.profile.metadata.name
    report = DecideReport(
        decision=decision,
        records={s.node: dict(observed[s.node].packages) for s in decision.start},
        node_order={s.node: first + i for i, s in enumerate(decision.start)},
        held=held_waits(nodes, profile, (r.node for r in decision.state.running)),
    )
    return Turn(report, unit_wait_changes(nodes, profile, decision, prepared.ordering.units))


def raced_claims(
    before: list[dict[str, Any]], after: list[dict[str, Any]], profile: NodeProfile
) -> tuple[str, ...]:
    """Pure: ``node (claim key)`` for each start claim of another profile that appeared between two
    reads on a node this profile targets."""
    own = claim_key(profile.metadata.name)

    def claims(nodes: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {
            (str(meta.get("name")), key)
            for meta in (n.get("metadata") or {} for n in nodes)
            if convert.targets(profile, meta.get("labels") or {})
            for key in meta.get("annotations") or {}
            if key.startswith(CLAIM_PREFIX) and key != own
        }

    return tuple(f"{node} ({key})" for node, key in sorted(claims(after) - claims(before)))


class RolloutActivities:
    def __init__(
        self,
        api: ApiClient,
        unregistered: Callable[[], tuple[str, ...]] = tuple,
        prometheus: Querier | None = None,
    ) -> None:
        self._api = api
        self._unregistered = unregistered
        self._prometheus = prometheus or Prometheus(PrometheusAccess())

    @activity.defn(name=NAMES.OBSERVE_AND_DECIDE)
    @temporal_errors
    def observe_and_decide(self, request: DecideRequest) -> DecideReport:
        name = request.profile.metadata.name
        for node in request.reset_failed:
            self._clear_failure(name, node)
        self._release(name, request.release_claims)
        ended = {r.node: r for r in request.ended}
        patch_nodes(lambda node: self._show_ended(name, ended[node]), ended)
        profiles = parse_profiles(resources.list_objects(self._api, PROFILE_PLURAL))
        nodes = kube_nodes.list_nodes(self._api)
        workloads, finishing = self._pods_on_nodes(request.state.spec.policy)
        # The fleet gate's measurements due now: taken before deciding, recorded in this result.
        measured = measure_fleet(self._prometheus, request.state, request.now)
        turn = plan_turn(nodes, request, profiles, workloads, finishing, measured=measured)
        report = turn.report
        starts = [s.node for s in report.decision.start]
        # Claim the nodes to start before the workflow acts on the decision, so other profiles'
        # decisions count them against their budgets at once (the node workflow drops the claim).
        patch_nodes(lambda node: nodeprogress.claim(self._api, profile=name, node=node), starts)
        if starts and any(p.metadata.name != name for p in profiles):
            self._verify_claims(request.profile, nodes, starts)
        self._show_unit_waits(name, nodes, turn.unit_waits)
        return report.model_copy(update={"unregistered_search_attributes": self._unregistered()})

    def _show_unit_waits(
        self, profile: str, nodes: list[dict[str, Any]], changes: Mapping[str, NodeStatusCondition | None]
    ) -> None:
        """Write the unit-wait conditions the decision changed, once its claims stand."""
        listed = {str(n["metadata"]["name"]): n for n in nodes if n["metadata"]["name"] in changes}
        type_ = unit_wait_condition_type(profile)
        patch_nodes(lambda node: unitwaits.show(self._api, listed[node], changes[node], type_), changes)

    def _pods_on_nodes(
        self, policy: RolloutPolicy
    ) -> tuple[dict[str, tuple[NodeWorkload, ...]] | None, dict[str, tuple[str, ...]] | None]:
        """The workloads on each node and the pods ``workloadWait`` waits for there, from one list
        of the bound pods, made only when the policy reads pods (``RolloutPolicy.reads_pods``)."""
        if not policy.reads_pods():
            return None, None
        return kube_workloads.policy_pods(kube_workloads.bound_pods(self._api), policy)

    def _verify_claims(self, profile: NodeProfile, before: list[dict[str, Any]], starts: list[str]) -> None:
        """Read the fleet again after claiming: another profile that claimed nodes between this
        decision's read and its claims decided without seeing them (and this one without seeing
        theirs), so together they could exceed a shared budget. Of two such decisions at least one
        sees the other's claim here (each reads after its own claims); it withdraws and decides
        again, so the two never both go ahead."""
        raced = raced_claims(before, kube_nodes.list_nodes(self._api), profile)
        if raced:
            self._release(profile.metadata.name, starts)
            raise RetryableError(
                f"other profiles started nodes while {profile.metadata.name} decided "
                f"({', '.join(raced)}); deciding again",
                reason="DecisionRaced",
            )

    def _release(self, profile: str, nodes: Iterable[str]) -> None:
        patch_nodes(lambda node: nodeprogress.release(self._api, profile=profile, node=node), nodes)

    def _show_ended(self, profile: str, result: NodeResult) -> None:
        """A node whose workflow ended without finishing is shown failed (which drops the start
        claim its workflow would have dropped)."""
        nodeprogress.publish(
            self._api,
            profile=profile,
            node=result.node,
            phase=NodePhase.FAILED,
            reason=NodeReason.WORKFLOW_ENDED,
            message=result.message,
        )

    def _clear_failure(self, profile: str, node: str) -> None:
        annotations = kube_nodes.get_node(self._api, node)["metadata"].get("annotations") or {}
        cleared = cleared_failure(annotations, profile)
        if cleared is not None:
            key, value = cleared
            nodestatus.merge_metadata(self._api, node, annotations={key: value})


def patch_nodes(patch: Callable[[str], None], nodes: Iterable[str]) -> None:
    """``patch`` each node, ``PATCH_THREADS`` at a time: one by one, a large decision's claims can
    outlast the activity's bound on a busy control plane. A node deleted since
    the read carries no claim to add or drop (its node workflow ends as gone)."""

    def one(node: str) -> None:
        with contextlib.suppress(NotFoundError):
            patch(node)

    with ThreadPoolExecutor(PATCH_THREADS) as pool:
        # Each in a copy of this context: the patches' spans stay children of the activity's.
        done = [pool.submit(contextvars.copy_context().run, one, node) for node in nodes]
    for future in done:
        future.result()  # the first error, raised


def rollout_activities(
    api: ApiClient,
    interceptors: Sequence[Interceptor] = (),
    *,
    unregistered: Callable[[], tuple[str, ...]] = tuple,
    prometheus: PrometheusAccess | None = None,
    registry: RegistryAccess | None = None,
) -> list[Callable[..., Any]]:
    """The rollout workflow's activities, ready for ``Worker(activities=...)``: observe-and-decide on
    ``api`` (reporting the search attributes ``unregistered`` says the namespace lacks), and the
    node starts and the search for ended node workflows on the worker's client plus
    ``interceptors``."""
    starter = NodeStarter(interceptors)
    decide = RolloutActivities(api, unregistered, Prometheus(prometheus or PrometheusAccess()))
    images = ImageResolver(
        Registry(registry or RegistryAccess()),
        lambda namespace, name: secrets.secret_text(api, namespace, name),
    )
    return [decide.observe_and_decide, starter.start_nodes, starter.ended_nodes, images.resolve_images]


def cleared_failure(annotations: Mapping[str, str], profile: str) -> tuple[str, str] | None:
    """Pure: the state annotation with every recorded stage failure forgotten, so the planner plans
    the node again (a human retried or skipped it); the stages already done stay done. None for a
    record that cannot be read: there is no failure to forget, and the planner keeps the node
    blocked as UnreadableState until a human repairs or resets the record (``fleetwright node
    reset``), while the rest of the rollout goes on."""
    try:
        state = read_profile_state(annotations, profile)
    except InvalidSpecError:
        return None
    packages = {
        name: record.model_copy(update={"pending": record.pending.model_copy(update={"failed": None})})
        if record.pending is not None and record.pending.failed
        else record
        for name, record in state.packages.items()
    }
    return format_annotation(state.model_copy(update={"packages": packages}))
