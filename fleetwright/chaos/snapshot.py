"""What the invariant checker sees of the cluster at one moment: the nodes of one rollout, the
stage Jobs and pods it created, and its NodeProfile's status, reduced to the facts the checks need.

Pure: it parses dicts in the apiserver's JSON shape (as ``kubectl get -o json`` prints them) and
never reads the API or the clock; the watcher passes both the objects and the time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwright.api import keys
from fleetwright.api.keys import CORDON_PREFIX, cordon_key, state_key
from fleetwright.errors import InvalidSpecError
from fleetwright.planner.node.state import parse_annotation

# kwok's simulated registry refusal and the kubelet's real reasons for an image that never pulls.
PULL_WAIT_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull"})


@dataclass(frozen=True)
class NodeView:
    name: str
    unschedulable: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()
    """Taint keys."""
    conditions: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Condition type -> (status, reason)."""

    def cordoned_by(self, profile: str) -> bool:
        return self.unschedulable and cordon_key(profile) in self.annotations

    @property
    def foreign_cordon(self) -> bool:
        """Unschedulable with no fleetwright cordon marker at all: someone else cordoned it."""
        return self.unschedulable and not any(k.startswith(CORDON_PREFIX) for k in self.annotations)

    def working(self, profile: str) -> bool:
        """The profile's recorded state has a change under way that has not failed."""
        value = self.annotations.get(state_key(profile))
        if value is None:
            return False
        try:
            state = parse_annotation(state_key(profile), value)
        except InvalidSpecError:
            return False  # a corrupt record starts no work (the planner refuses it)
        return any(r.pending is not None and r.pending.failed is None for r in state.packages.values())

    def our_taints(self) -> tuple[str, ...]:
        return tuple(t for t in self.taints if t.startswith(keys.PREFIX))


@dataclass(frozen=True)
class JobView:
    uid: str
    name: str
    profile: str
    node: str
    package: str
    version: str
    stage: str
    generation: str

    @property
    def key(self) -> tuple[str, str, str, str, str, str]:
        return (self.profile, self.node, self.package, self.version, self.stage, self.generation)


@dataclass(frozen=True)
class PodView:
    name: str
    node: str
    job: str
    waiting: tuple[str, ...] = ()
    """Waiting reasons of its (init) containers."""

    @property
    def pulling_forever(self) -> bool:
        return any(reason in PULL_WAIT_REASONS for reason in self.waiting)


@dataclass(frozen=True)
class ProfileView:
    phase: str = ""
    conditions: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    """Condition type -> (status, reason, message)."""
    failed_nodes: tuple[str, ...] = ()
    """Nodes the status names as failed (``nodeIssues`` with reason StageFailed)."""
    observed_generation: int | None = None
    generation: int | None = None


@dataclass(frozen=True)
class Snapshot:
    at: float
    """Seconds on the watcher's monotonic clock."""
    nodes: tuple[NodeView, ...] = ()
    jobs: tuple[JobView, ...] = ()
    pods: tuple[PodView, ...] = ()
    profile: ProfileView | None = None

    def node(self, name: str) -> NodeView | None:
        return next((n for n in self.nodes if n.name == name), None)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def node_view(node: Mapping[str, Any]) -> NodeView:
    meta, spec, status = _meta(node), node.get("spec") or {}, node.get("status") or {}
    return NodeView(
        name=str(meta.get("name", "")),
        unschedulable=bool(spec.get("unschedulable", False)),
        annotations=dict(meta.get("annotations") or {}),
        labels=dict(meta.get("labels") or {}),
        taints=tuple(str(t.get("key", "")) for t in spec.get("taints") or []),
        conditions={
            str(c.get("type")): (str(c.get("status", "")), str(c.get("reason", "")))
            for c in status.get("conditions") or []
        },
    )


def job_view(job: Mapping[str, Any]) -> JobView:
    meta = _meta(job)
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    return JobView(
        uid=str(meta.get("uid", "")),
        name=str(meta.get("name", "")),
        profile=str(labels.get(keys.PROFILE_LABEL, "")),
        # The annotation keeps the full node name; the label may be shortened.
        node=str(notes.get(keys.NODE_NAME_ANNOTATION) or labels.get(keys.NODE_LABEL, "")),
        package=str(labels.get(keys.PACKAGE_LABEL, "")),
        version=str(notes.get(keys.PACKAGE_VERSION_ANNOTATION, "")),
        stage=str(labels.get(keys.STAGE_LABEL, "")),
        generation=str(notes.get(keys.GENERATION_ANNOTATION, "")),
    )


def pod_view(pod: Mapping[str, Any]) -> PodView:
    meta, status = _meta(pod), pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    waiting = tuple(
        str(((s.get("state") or {}).get("waiting") or {}).get("reason", ""))
        for s in statuses
        if (s.get("state") or {}).get("waiting")
    )
    return PodView(
        name=str(meta.get("name", "")),
        node=str((pod.get("spec") or {}).get("nodeName", "")),
        job=str((meta.get("labels") or {}).get("job-name", "")),
        waiting=waiting,
    )


def profile_view(obj: Mapping[str, Any]) -> ProfileView:
    status = obj.get("status") or {}
    return ProfileView(
        phase=str(status.get("phase", "")),
        conditions={
            str(c.get("type")): (
                str(c.get("status", "")),
                str(c.get("reason", "")),
                str(c.get("message", "")),
            )
            for c in status.get("conditions") or []
        },
        failed_nodes=tuple(
            str(i.get("node")) for i in status.get("nodeIssues") or [] if i.get("reason") == "StageFailed"
        ),
        observed_generation=status.get("observedGeneration"),
        generation=_meta(obj).get("generation"),
    )


def snapshot(
    at: float,
    nodes: Iterable[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    profile: Mapping[str, Any] | None = None,
) -> Snapshot:
    return Snapshot(
        at=at,
        nodes=tuple(sorted((node_view(n) for n in nodes), key=lambda n: n.name)),
        jobs=tuple(job_view(j) for j in jobs),
        pods=tuple(pod_view(p) for p in pods),
        profile=profile_view(profile) if profile is not None else None,
    )
