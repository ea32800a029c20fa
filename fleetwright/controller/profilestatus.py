"""The NodeProfile status as a pure function of what the rollout workflow published (its memo
``progress``), the CR's generation and its previous status; and which transitions deserve an Event.

It owns the mapping (engine phase -> conditions, API phase, counts, node issues). It must not do
I/O or read the clock (the controller passes ``now``), so the same inputs always give the same
status: that is what makes two controllers writing it harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetwright.api.conditions import Condition, ConditionStatus, Phase, set_condition
from fleetwright.api.keys import (
    BLOCKED,
    DEGRADED,
    DELETING,
    PAUSED,
    PAUSED_ANNOTATION,
    PROGRESSING,
    READY,
    SEARCHABLE,
    ProfileReason,
)
from fleetwright.api.nodeprofile import NodeIssue, NodeProfileStatus
from fleetwright.workflows.payloads import Progress
from fleetwright.workflows.search import REGISTRATION

MAX_ISSUES = 50
MAX_LISTED = 10  # nodes named in one condition message


@dataclass(frozen=True)
class Inputs:
    """Everything the status derives from besides the previous status and the clock."""

    generation: int
    workflow_id: str
    policy: str
    progress: Progress | None
    policy_missing: bool = False
    deleting: bool = False
    """The CR has a deletionTimestamp (our finalizer holds it until the nodes are clean)."""
    namespace: str = "default"
    """The Temporal namespace the rollout runs in."""


@dataclass(frozen=True)
class Transition:
    """A change a human cares about, recorded as an Event on the CR."""

    type: str  # Normal | Warning
    reason: str
    note: str


_C = tuple[str, ConditionStatus, str, str]  # type, status, reason, message


def derive(inputs: Inputs, previous: NodeProfileStatus | None, now: datetime) -> NodeProfileStatus:
    """The status to write. Transition times are kept for conditions whose status is unchanged."""
    phase, wanted = _conditions(inputs)
    progress = inputs.progress
    conditions = list(previous.conditions) if previous else []
    observed = progress.generation if progress else None
    for type_, status, reason, message in wanted:
        conditions = set_condition(
            conditions,
            Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                observed_generation=observed,
                last_transition_time=now,
            ),
        )
    return NodeProfileStatus(
        observed_generation=observed,
        conditions=conditions,
        phase=phase,
        policy=inputs.policy,
        nodes_targeted=progress.targeted if progress else 0,
        nodes_complete=progress.updated if progress else 0,
        nodes_in_progress=progress.running if progress else 0,
        nodes_blocked=progress.blocked if progress else 0,
        nodes_waiting=progress.waiting if progress else 0,
        nodes_failed=progress.failed if progress else 0,
        progress=f"{progress.updated}/{progress.targeted}" if progress else None,
        current_step=(progress.step or None) if progress else None,
        workflow_id=inputs.workflow_id,
        node_issues=_issues(progress) if progress else [],
    )


def _conditions(inputs: Inputs) -> tuple[Phase, list[_C]]:
    phase, conditions = _rollout_conditions(inputs)
    if not inputs.deleting:
        return phase, conditions
    deleting = _deleting(inputs.progress)
    ready: _C = (READY, "False", ProfileReason.DELETING, deleting[3])
    return "Deleting", [ready, *conditions[1:], deleting]


def _deleting(progress: Progress | None) -> _C:
    if progress is None or not progress.deleting:
        return (
            DELETING,
            "True",
            ProfileReason.DELETION_PENDING,
            "waiting for the rollout to pick the deletion up",
        )
    if progress.phase == "Deleted":
        return (DELETING, "True", ProfileReason.NODES_CLEANED_UP, "nodes cleaned up; releasing the finalizer")
    clean = f"{progress.updated}/{progress.targeted} nodes without the profile's packages"
    if progress.phase in ("Halted", "Blocked", "Paused"):
        why = {"Halted": "uninstall halted", "Blocked": "uninstall blocked", "Paused": "paused"}[
            progress.phase
        ]
        parts = [f"{why} at {clean}: {progress.message}"]
        if progress.failed_nodes:
            parts.append(f"failed: {_names(progress.failed_nodes)}")
        if progress.blocked_nodes:
            parts.append(
                "blocked: "
                + "; ".join(
                    f"{n}: {progress.blocked_reasons.get(n, 'blocked')}"
                    for n in progress.blocked_nodes[:MAX_LISTED]
                )
            )
        return (DELETING, "True", ProfileReason.DELETION_BLOCKED, "; ".join(parts) + "; the finalizer stays")
    return (DELETING, "True", ProfileReason.UNINSTALLING, f"{clean}; {progress.message}")


# The engine's phases that keep their word in the status.
_SAME_WORD: dict[str, Phase] = {
    "Halted": "Halted",
    "RollingBack": "RollingBack",
    "RolledBack": "RolledBack",
    "Aborted": "Aborted",
    "Paused": "Paused",
    "Blocked": "Blocked",
}


def rollout_phase(progress: Progress, generation: int, *, deleting: bool = False) -> Phase:
    """The rollout's phase in the one vocabulary the NodeProfile's status.phase, the CLI and the
    Events share (``deleting``: the profile is being deleted)."""
    if deleting:
        return "Deleting"
    phase: Phase
    if progress.phase == "Complete":
        # The steps ran out before every targeted node was updated (failed, left out, or joined
        # after the last batch): Ready promises that every targeted node carries every package.
        phase = "Degraded" if progress.updated < progress.targeted else "Complete"
    else:
        # Waiting (a soak, a window, its own budget) is Progressing: the message says for what.
        phase = _SAME_WORD.get(progress.phase, "Progressing")
    if progress.generation < generation and phase in ("Complete", "Degraded"):
        # The CR changed but the workflow has not picked the new generation up yet.
        return "Progressing"
    return phase


def _rollout_conditions(inputs: Inputs) -> tuple[Phase, list[_C]]:
    progress = inputs.progress
    if progress is None:
        if inputs.policy_missing:
            text = f"DeploymentPolicy {inputs.policy} does not exist; the rollout waits for it"
            not_found = ProfileReason.POLICY_NOT_FOUND
            return "Pending", _quiet(not_found, text, progressing=("False", not_found, text))
        text = "waiting for the rollout workflow to publish its first decision"
        starting: tuple[ConditionStatus, str, str] = ("True", ProfileReason.ROLLOUT_STARTING, text)
        return "Pending", _quiet(ProfileReason.ROLLOUT_PENDING, text, progressing=starting)
    counts = f"{progress.updated}/{progress.targeted} nodes updated"
    if progress.spared:
        counts += f" ({progress.spared} spared by preflight, never cordoned)"
    phase = rollout_phase(progress, inputs.generation)
    if phase == "Degraded":
        missing = progress.targeted - progress.updated
        text = f"{counts}; {missing} targeted node(s) not updated; {progress.message}"
        ready: tuple[ConditionStatus, str, str] = ("False", ProfileReason.NODES_NOT_UPDATED, text)
        moving: tuple[ConditionStatus, str, str] = ("False", ProfileReason.ROLLOUT_COMPLETE, progress.message)
    elif progress.phase == "Complete":
        ready = ("True", ProfileReason.ROLLOUT_COMPLETE, f"{counts}; {progress.message}")
        moving = ("False", ProfileReason.ROLLOUT_COMPLETE, progress.message)
    elif progress.phase in ("Halted", "Aborted"):
        reason = ProfileReason.ROLLOUT_HALTED if progress.phase == "Halted" else ProfileReason.ROLLOUT_ABORTED
        ready, moving = ("False", reason, counts), ("False", reason, progress.message)
    elif progress.phase in ("RollingBack", "RolledBack"):
        ready, moving = _rollback(progress)
    elif progress.phase == "Paused":
        ready = ("False", ProfileReason.ROLLOUT_PAUSED, counts)
        moving = ("False", ProfileReason.PAUSED, progress.message)
    else:
        reason = {"Blocked": ProfileReason.NODES_BLOCKED, "Waiting": ProfileReason.WAITING}.get(
            progress.phase, ProfileReason.ROLLING_OUT
        )
        ready, moving = (
            ("False", ProfileReason.ROLLOUT_IN_PROGRESS, counts),
            ("True", reason, progress.message),
        )
    if progress.generation < inputs.generation:
        # The CR changed but the workflow has not picked the new generation up yet: never report
        # the old generation's completion as Ready for the new spec.
        text = f"generation {inputs.generation} not yet picked up (rollout is at {progress.generation})"
        pending = ProfileReason.SPEC_CHANGE_PENDING
        ready, moving = ("False", pending, text), ("True", pending, text)
    return phase, [
        (READY, *ready),
        (PROGRESSING, *moving),
        _paused(progress),
        _blocked(progress),
        _degraded(progress),
        _searchable(progress, inputs.namespace),
    ]


def _rollback(
    progress: Progress,
) -> tuple[tuple[ConditionStatus, str, str], tuple[ConditionStatus, str, str]]:
    """Ready and Progressing of a rollout the failure rule rolls back (or rolled back)."""
    generation = progress.rolled_back_generation
    if progress.phase == "RolledBack":
        text = (
            f"generation {generation} rolled back; waiting for a spec with other packages: {progress.message}"
        )
        return ("False", ProfileReason.ROLLED_BACK, text), (
            "False",
            ProfileReason.ROLLED_BACK,
            progress.message,
        )
    text = f"rolling back generation {generation}: {progress.message}"
    return ("False", ProfileReason.ROLLING_BACK, text), ("True", ProfileReason.ROLLING_BACK, progress.message)


def _quiet(reason: str, text: str, *, progressing: tuple[ConditionStatus, str, str]) -> list[_C]:
    return [
        (READY, "False", reason, text),
        (PROGRESSING, *progressing),
        (PAUSED, "False", ProfileReason.NOT_PAUSED, ""),
        (BLOCKED, "False", ProfileReason.NOT_BLOCKED, ""),
        (DEGRADED, "False", ProfileReason.NOT_DEGRADED, ""),
    ]


def _paused(progress: Progress) -> _C:
    if progress.paused:
        text = f"paused (annotation {PAUSED_ANNOTATION} or the CLI)"
        return (PAUSED, "True", ProfileReason.PAUSED_BY_USER, text)
    return (PAUSED, "False", ProfileReason.NOT_PAUSED, "")


def _blocked(progress: Progress) -> _C:
    if not progress.blocked:
        return (BLOCKED, "False", ProfileReason.NOT_BLOCKED, "")
    shown = [
        f"{n}: {progress.blocked_reasons.get(n, 'blocked')}" for n in progress.blocked_nodes[:MAX_LISTED]
    ]
    more = progress.blocked - len(shown)
    return (
        BLOCKED,
        "True",
        ProfileReason.NODES_BLOCKED,
        "; ".join(shown) + (f" (and {more} more)" if more > 0 else ""),
    )


def _degraded(progress: Progress) -> _C:
    if progress.phase in ("RollingBack", "RolledBack"):
        what = "rolling back" if progress.phase == "RollingBack" else "rolled back"
        return (
            DEGRADED,
            "True",
            ProfileReason.ROLLING_BACK if progress.phase == "RollingBack" else ProfileReason.ROLLED_BACK,
            f"generation {progress.rolled_back_generation} {what}: {progress.message}",
        )
    if progress.phase == "Halted":
        return (
            DEGRADED,
            "True",
            ProfileReason.ROLLOUT_HALTED,
            f"{progress.message}; failed: {_names(progress.failed_nodes)}",
        )
    if progress.phase == "Complete" and progress.updated < progress.targeted and not progress.failed:
        missing = progress.targeted - progress.updated
        return (DEGRADED, "True", ProfileReason.NODES_NOT_UPDATED, f"{missing} targeted node(s) not updated")
    if progress.failed:
        return (
            DEGRADED,
            "True",
            ProfileReason.NODES_FAILED,
            f"{progress.failed} node(s) failed: {_names(progress.failed_nodes)}",
        )
    return (DEGRADED, "False", ProfileReason.NOT_DEGRADED, "")


def _searchable(progress: Progress, namespace: str) -> _C:
    missing = progress.unregistered_search_attributes
    if not missing:
        return (SEARCHABLE, "True", ProfileReason.SEARCH_ATTRIBUTES_REGISTERED, "")
    commands = "; ".join(
        f"temporal operator search-attribute create --namespace {namespace} --name {name} "
        f"--type {REGISTRATION.get(name, 'Keyword')}"
        for name in missing
    )
    return (
        SEARCHABLE,
        "False",
        ProfileReason.SEARCH_ATTRIBUTES_MISSING,
        f"Temporal namespace {namespace} lacks the search attributes {', '.join(missing)}: the rollout runs "
        f"without them, and the Temporal UI and fleetwright history cannot find it by them. "
        f"Register them ({commands}); the worker notices within a minute.",
    )


def _names(nodes: tuple[str, ...]) -> str:
    shown = ", ".join(nodes[:MAX_LISTED]) or "none"
    return shown + (f" (and {len(nodes) - MAX_LISTED} more)" if len(nodes) > MAX_LISTED else "")


def _issues(progress: Progress) -> list[NodeIssue]:
    issues = [
        NodeIssue(
            node=n,
            reason=ProfileReason.STAGE_FAILED,
            message=progress.failed_reasons.get(n, "failed; see the node's conditions and Events")[:4096],
        )
        for n in progress.failed_nodes
    ]
    issues += [
        NodeIssue(
            node=n, reason=ProfileReason.NODE_BLOCKED, message=progress.blocked_reasons.get(n, "")[:4096]
        )
        for n in progress.blocked_nodes
    ]
    issues += [
        NodeIssue(node=n, reason=ProfileReason.WAITING_FOR_UNIT, message=reason[:4096])
        for n, reason in progress.waiting_reasons.items()
        if reason.startswith(f"{ProfileReason.WAITING_FOR_UNIT}:")
    ]
    return issues[:MAX_ISSUES]


def _deletion_transitions(previous: NodeProfileStatus | None, current: NodeProfileStatus) -> list[Transition]:
    now = next((c for c in current.conditions if c.type == DELETING), None)
    if now is None:
        return []
    was = next((c for c in previous.conditions if c.type == DELETING), None) if previous else None
    out = []
    if was is None:
        out.append(
            Transition(
                "Normal", ProfileReason.DELETION_STARTED, "uninstalling packages with uninstall.enabled"
            )
        )
    if now.reason == ProfileReason.DELETION_BLOCKED and (was is None or was.reason != now.reason):
        out.append(Transition("Warning", ProfileReason.DELETION_BLOCKED, now.message))
    return out


def _searchable_transitions(
    previous: NodeProfileStatus | None, current: NodeProfileStatus
) -> list[Transition]:
    now = next((c for c in current.conditions if c.type == SEARCHABLE), None)
    was = next((c for c in previous.conditions if c.type == SEARCHABLE), None) if previous else None
    if now is not None and now.status == "False" and (was is None or was.status != "False"):
        return [Transition("Warning", ProfileReason.SEARCH_ATTRIBUTES_MISSING, now.message)]
    return []


def transitions(previous: NodeProfileStatus | None, current: NodeProfileStatus) -> list[Transition]:
    """Events for the change from ``previous`` to ``current`` (phase changes and a newly adopted
    generation); none when nothing a human cares about changed."""
    before = previous.phase if previous else None
    after = current.phase
    out: list[Transition] = []
    old_gen = previous.observed_generation if previous else None
    if (
        old_gen is not None
        and current.observed_generation is not None
        and current.observed_generation > old_gen
    ):
        out.append(
            Transition(
                "Normal",
                ProfileReason.SPEC_CHANGE_ACCEPTED,
                f"rolling out generation {current.observed_generation}",
            )
        )
    out += _deletion_transitions(previous, current)
    out += _searchable_transitions(previous, current)
    if after in (before, "Deleting"):
        return out
    progress = current.progress or "0/0"
    ready = next((c for c in current.conditions if c.type == READY), None)
    degraded = next((c for c in current.conditions if c.type == DEGRADED), None)
    blocked = next((c for c in current.conditions if c.type == BLOCKED), None)
    if before in (None, "Pending") and after not in ("Pending", None):
        out.append(
            Transition("Normal", ProfileReason.ROLLOUT_STARTED, f"rollout started ({progress} nodes updated)")
        )
    if after == "Paused":
        out.append(Transition("Normal", ProfileReason.ROLLOUT_PAUSED, f"paused at {progress} nodes updated"))
    elif before == "Paused" and after != "Pending":
        out.append(
            Transition("Normal", ProfileReason.ROLLOUT_RESUMED, f"resumed at {progress} nodes updated")
        )
    if after in ("RollingBack", "RolledBack"):
        reason = ProfileReason.ROLLING_BACK if after == "RollingBack" else ProfileReason.ROLLED_BACK
        out.append(Transition("Warning", reason, degraded.message if degraded else after))
    elif after in ("Halted", "Aborted"):
        out.append(
            Transition("Warning", ProfileReason.ROLLOUT_HALTED, degraded.message if degraded else "halted")
        )
    elif after == "Blocked":
        out.append(
            Transition("Warning", ProfileReason.ROLLOUT_BLOCKED, blocked.message if blocked else "blocked")
        )
    elif after in ("Complete", "Degraded"):
        kind = "Normal" if after == "Complete" else "Warning"
        out.append(Transition(kind, ProfileReason.ROLLOUT_COMPLETE, ready.message if ready else progress))
    return out
