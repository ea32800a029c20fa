"""What the engine observed, handed to ``decide`` each time: the targeted nodes (labels, readiness,
cordons by others, other disruptions, the package state this profile recorded, the status of this
profile's node workflow, the workloads whose pods run there), approvals, and pause.

The engine fills these from the API server and its child workflows; the planner trusts them and
never reads anything itself.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from fleetwright.planner.base import Frozen
from fleetwright.planner.health.analysis import ScopedMeasurement
from fleetwright.planner.node.state import PackageRecord


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    GONE = "gone"
    """The Node was deleted while its node workflow ran: it left the fleet (not a failure)."""


class NodeWorkload(Frozen):
    """One workload's share of a node: a training job (or any group of pods that stops as a whole
    when one of its pods is evicted) with its pods on the node and the GPUs they request."""

    name: str
    """``<Kind>/<namespace>/<name>``, e.g. ``JobSet/research/llama-70b`` (``kube.workloads``)."""
    pods: int = Field(default=1, ge=0)
    gpus: int = Field(default=0, ge=0)


class NodeObservation(Frozen):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    ready: bool = True
    unschedulable: bool = False
    """Cordoned by someone other than this profile (a foreign cordon: work under it, never lift it)."""
    own_cordon: bool = False
    """This profile's cordon is on the node. Where no node workflow of it runs (a failed node is
    left cordoned), the node counts against maxUnavailable like any other unavailable node."""
    gate_failed: bool = False
    """This profile's cordon is on the node and its node condition says its health gate failed
    (``HealthGateFailed`` or ``HardwareSuspect``): its health was shown bad, so a rollback that
    returns it runs the node gate again before it goes back into service."""
    conditions: dict[str, str] = Field(default_factory=dict)
    """Node condition type -> status, for soak health gates."""
    disruptions: tuple[str, ...] = ()
    """Other reasons the node is unavailable now, e.g. ``profile/gpu-driver`` working on it, or an
    external disruptor; each counts against maxUnavailable and blocks a start here."""
    waiting_on: tuple[str, ...] = ()
    """Earlier-priority profiles not yet complete on this node: it must not start here yet."""
    sequencing_hold: str | None = None
    """With ``sequencing: all``, why an earlier-priority profile sharing this node holds it back
    (``<Reason>: <message>``, ``priority.sequencing_hold``): it must not start here yet."""
    packages: dict[str, PackageRecord] = Field(default_factory=dict)
    """This profile's recorded package state on the node (``node.state``)."""
    unreadable: str | None = None
    """Why this profile's recorded state on the node cannot be read (a corrupt annotation; names the
    key and the problem). Such a node is left alone and listed as blocked until a human repairs or
    resets the record; ``packages`` is then empty and means nothing."""
    packages_key: str | None = None
    """Optional identity of ``packages`` (``fleet`` uses a digest of the annotation value): nodes
    with equal keys must have equal ``packages``; the planner then plans that state once."""
    run: RunStatus | None = None
    """This profile's node workflow for the current target, if any."""
    message: str = ""
    """Why the node workflow failed, when ``run`` is failed."""
    spared: bool = False
    """With ``run`` succeeded: its preflight passed, it was never cordoned."""
    finishing: tuple[str, ...] = ()
    """Pods on the node the policy's ``workloadWait`` waits for (``namespace/name``): while any
    runs, the node does not start, up to the wait's bound."""
    workloads: tuple[NodeWorkload, ...] = ()
    """The workloads whose pods run on the node, by name. Empty everywhere: no workload information
    (the order is the plain zone-spread order); empty on one node of a fleet with some: idle."""


class Observations(Frozen):
    nodes: tuple[NodeObservation, ...] = ()
    approvals: tuple[str, ...] = ()
    """Approval step ids granted (``rollout/<step>`` or ``<compartment>/<step>``)."""
    fleet_measurements: tuple[ScopedMeasurement, ...] = ()
    """Fleet-gate measurements taken for this turn (``planner.rollout.fleetgate.due``)."""
    rollback: str = ""
    """Roll back now, for this reason, whatever this rollout's own failure rule says (a campaign's
    failure rule fired in another cluster). Empty: only this rollout's own rules decide."""
    paused: bool = False
