"""What ``fleetwright status`` shows, as a pure function of what it read: the rollout's published
progress (the workflow memo), the NodeProfile, its targeted Nodes (the status label, condition and
recorded state the node workflows write on each) and the stage Jobs running now.

Owns the view models (they are the ``-o json|yaml`` output) and their rendering as a rich tree.
It must not do I/O or read the clock: the command passes ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from fleetwright.api.keys import (
    NodeReason,
    condition_type,
    cordon_key,
    status_label_key,
    unit_wait_condition_type,
)
from fleetwright.api.nodeprofile import NodeProfile
from fleetwright.controller.profilestatus import rollout_phase
from fleetwright.errors import InvalidSpecError
from fleetwright.planner.node.state import read_profile_state
from fleetwright.planner.rollout.spec import RollbackOf
from fleetwright.workflows.payloads import Progress

# The node condition reasons a drain shows while it waits (activities/drain.py).
DRAIN_WAITS = frozenset({"DrainBlocked", "DrainTimeout"})
GATE_WAITS = frozenset(
    {NodeReason.HEALTH_GATE, NodeReason.GATE_INCONCLUSIVE, NodeReason.MONITORING_UNAVAILABLE}
)
# The NodeProfile's status.phase words (``rollout_phase``): the CLI says what the CR says.
TERMINAL_PHASES = frozenset({"Complete", "Degraded", "Halted", "Aborted", "RolledBack"})
STATE_STYLE = {
    "Updated": "green",
    "Previous": "green",
    "Updating": "cyan",
    "Waiting": "blue",
    "Blocked": "yellow",
    "Failed": "red",
    "Pending": "dim",
    "Skipped": "magenta",
}


class NodeLine(BaseModel):
    node: str
    state: str
    """Updated, Updating, Waiting (starts by itself later), Blocked (needs something outside the
    rollout to change), Failed, Pending, or during and after a rollback Previous (carries what it
    had before the rolled-back rollout)."""
    stage: str = ""
    """What the node is doing now: ``drain``, ``apply tuning`` (a running stage Job)..."""
    reason: str = ""
    message: str = ""
    cordoned: bool = False


class RolloutView(BaseModel):
    profile: str
    phase: str
    message: str = ""
    step: str = ""
    target: str = ""
    generation: int = 0
    rolled_back_generation: int | None = None
    workflow_id: str = ""
    paused: bool = False
    targeted: int = 0
    updated: int = 0
    running: int = 0
    failed: int = 0
    blocked: int = 0
    waiting: int = 0
    max_unavailable: int = 0
    spared: int = 0
    """Nodes whose preflight passed: recorded at the target, never cordoned."""
    eta: datetime | None = None
    eta_note: str = ""
    images: dict[str, str] = Field(default_factory=dict)
    """image reference -> the digest every stage Job of the generation runs (image pinning)."""
    image_warnings: dict[str, str] = Field(default_factory=dict)
    """image reference -> why its signature does not verify (a policy's imageSignatures warns)."""
    nodes: list[NodeLine] = Field(default_factory=list)


class ProfileLine(BaseModel):
    """One row of ``fleetwright status`` without a profile: the status the controller mirrors."""

    profile: str
    phase: str
    progress: str = ""
    step: str = ""
    policy: str = ""
    waiting: int = 0
    blocked: int = 0
    failed: int = 0
    paused: bool = False


def profile_lines(objects: Sequence[Mapping[str, Any]], paused_annotation: str) -> list[ProfileLine]:
    lines = []
    for obj in objects:
        status = obj.get("status") or {}
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        lines.append(
            ProfileLine(
                profile=obj["metadata"]["name"],
                phase=status.get("phase") or "Pending",
                progress=status.get("progress") or "",
                step=status.get("currentStep") or "",
                policy=status.get("policy") or "",
                waiting=status.get("nodesWaiting") or 0,
                blocked=status.get("nodesBlocked") or 0,
                failed=status.get("nodesFailed") or 0,
                paused=str(annotations.get(paused_annotation, "")).lower() == "true",
            )
        )
    return sorted(lines, key=lambda line: line.profile)


def _condition(node: Mapping[str, Any], type_: str) -> Mapping[str, Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), {})


def _carries_target(annotations: Mapping[str, str], profile: NodeProfile) -> bool:
    """Every package of the spec recorded at its version with no change pending."""
    try:
        records = read_profile_state(annotations, profile.metadata.name).packages
    except InvalidSpecError:
        return False  # an unreadable record is never "updated"
    return all(
        (record := records.get(p.name)) is not None and record.version == p.version and record.pending is None
        for p in profile.spec.packages
    )


def node_line(
    node: Mapping[str, Any], profile: NodeProfile, progress: Progress | None, running_stage: str
) -> NodeLine:
    """One targeted node's line: the rollout's view of it first, then what the node says."""
    name = node["metadata"]["name"]
    meta = node["metadata"]
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    label = (meta.get("labels") or {}).get(status_label_key(profile.metadata.name), "")
    condition = _condition(node, condition_type(profile.metadata.name))
    reason, message = str(condition.get("reason") or ""), str(condition.get("message") or "")
    cordoned = (
        bool((node.get("spec") or {}).get("unschedulable"))
        and cordon_key(profile.metadata.name) in annotations
    )
    line = NodeLine(node=name, state="Pending", reason=reason, message=message, cordoned=cordoned)
    if progress is not None and name in progress.failed_nodes:
        failure = progress.failed_reasons.get(name)
        return line.model_copy(update={"state": "Failed", **({"message": failure} if failure else {})})
    if progress is not None and name in progress.running_nodes:
        waiting = reason in DRAIN_WAITS or label == "Blocked"
        stage = running_stage or (
            "drain" if reason in DRAIN_WAITS else "health gate" if reason in GATE_WAITS else ""
        )
        return line.model_copy(update={"state": "Blocked" if waiting else "Updating", "stage": stage})
    if progress is not None and name in progress.blocked_nodes:
        why = progress.blocked_reasons.get(name, "blocked")
        return line.model_copy(update={"state": "Blocked", "reason": "NotStarted", "message": why})
    if progress is not None and name in progress.waiting_reasons:
        why = progress.waiting_reasons[name]
        return line.model_copy(update={"state": "Waiting", "reason": "NotStarted", "message": why})
    # The rollout lists a bounded number of waiting nodes; a node held for its workload unit says
    # so itself, so each one beyond the list shows its wait too.
    unit = _condition(node, unit_wait_condition_type(profile.metadata.name))
    if unit.get("status") == "True":
        why = f"{unit.get('reason') or ''}: {unit.get('message') or ''}"
        return line.model_copy(update={"state": "Waiting", "reason": "NotStarted", "message": why})
    return line.model_copy(update={"state": _settled_state(annotations, profile, progress)})


def _settled_state(annotations: Mapping[str, str], profile: NodeProfile, progress: Progress | None) -> str:
    """A node the rollout is not holding: Updated or Pending; during and after a rollback,
    Previous (back, or never changed) or Pending (still to return)."""
    if progress is not None and progress.rolled_back is not None:
        return "Pending" if _to_return(annotations, profile, progress.rolled_back) else "Previous"
    return "Updated" if _carries_target(annotations, profile) else "Pending"


def _to_return(annotations: Mapping[str, str], profile: NodeProfile, of: RollbackOf) -> bool:
    """The rollback still has to return something the rolled-back rollout changed on the node."""
    try:
        records = read_profile_state(annotations, profile.metadata.name).packages
    except InvalidSpecError:
        return True
    return any(r.before is not None and r.before.by(of.target, of.since) for r in records.values())


def rollout_view(
    profile: NodeProfile,
    progress: Progress | None,
    nodes: Sequence[Mapping[str, Any]],
    running_stages: Mapping[str, str],
    *,
    workflow_id: str,
    eta: datetime | None = None,
    eta_note: str = "",
) -> RolloutView:
    """The whole view; ``nodes`` are the profile's targeted nodes, ``running_stages`` maps a node
    to its active stage Job (``apply tuning``)."""
    lines = [node_line(n, profile, progress, running_stages.get(n["metadata"]["name"], "")) for n in nodes]
    order = {
        "Failed": 0,
        "Blocked": 1,
        "Updating": 2,
        "Waiting": 3,
        "Pending": 4,
        "Updated": 5,
        "Previous": 5,
    }
    lines.sort(key=lambda line: (order.get(line.state, 6), line.node))
    base = RolloutView(
        profile=profile.metadata.name,
        phase="Pending" if progress is None else progress.phase,
        message="no progress published yet (is the controller running?)" if progress is None else "",
        workflow_id=workflow_id,
        generation=profile.metadata.generation or 0,
        targeted=len(lines),
        eta=eta,
        eta_note=eta_note,
        nodes=lines,
    )
    if progress is None:
        return base
    # Running nodes the view shows as blocked (a drain's wait) that the progress does not count yet.
    held = sum(
        1
        for line in lines
        if line.state == "Blocked" and line.stage and line.node not in progress.blocked_nodes
    )
    return base.model_copy(
        update={
            "phase": rollout_phase(progress, generation=progress.generation, deleting=progress.deleting),
            "message": progress.message,
            "step": progress.step,
            "target": progress.target,
            "generation": progress.generation,
            "rolled_back_generation": progress.rolled_back_generation,
            "paused": progress.paused,
            "targeted": progress.targeted,
            "updated": progress.updated,
            "running": progress.running,
            "failed": progress.failed,
            "blocked": progress.blocked + held,
            "waiting": progress.waiting,
            "max_unavailable": progress.max_unavailable,
            "spared": progress.spared,
            "images": progress.images,
            "image_warnings": progress.image_warnings,
        }
    )


def _rollback_note(view: RolloutView) -> str:
    generation = view.rolled_back_generation
    if generation is None:
        return ""
    if view.phase == "RollingBack":
        return f" [magenta](rolling back generation {generation})[/]"
    return f" [yellow](generation {generation} rolled back: apply a new spec)[/]"


def _offset(eta: datetime, now: datetime) -> str:
    minutes = max(0, int((eta - now).total_seconds() // 60))
    return f"in {minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"in {minutes}m"


def render(view: RolloutView, console: Console, now: datetime, *, max_nodes: int = 50) -> None:
    console.print(tree(view, now, max_nodes=max_nodes), highlight=False)


def tree(view: RolloutView, now: datetime, *, max_nodes: int = 50) -> Tree:
    """The tree: header, step and counts, ETA, then one branch per node (problems first)."""
    paused = " [yellow](paused)[/]" if view.paused else ""
    phase_style = {
        "Complete": "green",
        "Degraded": "yellow",
        "Halted": "red",
        "Aborted": "red",
        "Blocked": "yellow",
        "RollingBack": "magenta",
        "RolledBack": "yellow",
    }.get(view.phase, "cyan")
    root = Tree(
        f"[bold]NodeProfile {escape(view.profile)}[/]  [{phase_style}]{escape(view.phase)}[/]{paused}"
        + (f" — {escape(view.message)}" if view.message else "")
    )
    root.add(
        f"step: {escape(view.step or '-')}   target: {escape(view.target or '-')}   "
        f"generation {view.generation}{_rollback_note(view)}"
    )
    root.add(
        f"nodes: {view.updated}/{view.targeted} updated, {view.running} running, {view.waiting} waiting, "
        f"{view.blocked} blocked, {view.failed} failed (maxUnavailable {view.max_unavailable})"
        + (f"; {view.spared} spared by preflight (never cordoned)" if view.spared else "")
    )
    if view.eta is not None:
        root.add(
            f"ETA: {view.eta.isoformat(timespec='seconds')} "
            f"({_offset(view.eta, now)}; {escape(view.eta_note)})"
        )
    elif view.eta_note:
        root.add(f"ETA: {escape(view.eta_note)}")
    if view.images:
        pinned = root.add("images (pinned for this generation)")
        for reference, digest in sorted(view.images.items()):
            pinned.add(f"{escape(reference)} → {escape(digest.partition('@')[2] or 'not pinned')}")
    if view.image_warnings:
        warned = root.add("[yellow]image signatures (warn: rolled out anyway)[/]")
        for reference, why in sorted(view.image_warnings.items()):
            warned.add(f"{escape(reference)}: {escape(why)}")
    branch = root.add("nodes")
    for line in view.nodes[:max_nodes]:
        branch.add(_node_text(line))
    if len(view.nodes) > max_nodes:
        branch.add(f"… {len(view.nodes) - max_nodes} more (-o json for all)")
    root.add(f"[dim]workflow {escape(view.workflow_id)}[/]")
    return root


def _node_text(line: NodeLine) -> str:
    style = STATE_STYLE.get(line.state, "white")
    parts = [f"[bold]{escape(line.node)}[/]", f"[{style}]{line.state}[/]"]
    if line.stage:
        parts.append(escape(line.stage))
    if line.cordoned:
        parts.append("[dim]cordoned[/]")
    if line.state != "Updated" and (line.reason or line.message):
        parts.append(
            f"— {escape(line.reason)}: {escape(line.message)}" if line.reason else escape(line.message)
        )
    return "  ".join(parts)


def render_profiles(lines: Sequence[ProfileLine], console: Console) -> None:
    if not lines:
        console.print("no NodeProfiles")
        return
    table = Table(title="NodeProfiles", title_justify="left")
    for column in ("profile", "phase", "progress", "step", "waiting", "blocked", "failed", "policy"):
        table.add_column(column, no_wrap=column not in ("step",))
    for line in lines:
        phase = line.phase + (" (paused)" if line.paused and line.phase != "Paused" else "")
        table.add_row(
            line.profile,
            phase,
            line.progress,
            line.step,
            str(line.waiting),
            str(line.blocked),
            str(line.failed),
            line.policy,
        )
    console.print(Group(table))
