"""How one profile's progress on a node is shown to humans: a summary label, a node condition and
Events for blocks and failures.

Owns the writes of the label (``keys.status_label_key``) and the condition (``keys.condition_type``)
and the mapping from a phase to the condition's status: ``True`` complete, ``Unknown`` in progress,
``False`` failed or blocked (the reason says which). It must not decide *when* a status changes; the node
workflow and the waits do.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from concurrent.futures import Executor

from fleetwright.activities.payloads import NodePhase, NodeTarget
from fleetwright.activities.waiting import blocking
from fleetwright.api.keys import NodeReason, claim_key, condition_type, status_label_key
from fleetwright.kube import events, nodestatus
from fleetwright.kube.client import ApiClient

MAX_MESSAGE = 1000

CONDITION_STATUS = {
    NodePhase.COMPLETE: "True",
    NodePhase.IN_PROGRESS: "Unknown",
    NodePhase.FAILED: "False",
    NodePhase.BLOCKED: "False",
}
# Phases a node workflow ends in.
FINAL_PHASES = frozenset({NodePhase.COMPLETE, NodePhase.FAILED})
# Phases that deserve a Warning event: a human may have to act.
WARNING_PHASES = frozenset({NodePhase.FAILED, NodePhase.BLOCKED})


def publish(
    api: ApiClient,
    *,
    profile: str,
    node: str,
    phase: NodePhase,
    reason: str,
    message: str,
    event_key: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> None:
    """Label, condition and (for failures and blocks) one Warning event; ``annotations`` (a
    stage's record) in the label's patch, written before the condition. Idempotent: an unchanged
    label or condition is not rewritten, and the same event key records one Event."""
    facts, _ = nodestatus.read_node(api, node)
    label_key = status_label_key(profile)
    claim = claim_key(profile)
    notes: dict[str, str | None] = {
        key: value for key, value in (annotations or {}).items() if facts.annotations.get(key) != value
    }
    if ends_claim(phase, reason) and claim in facts.annotations:
        notes[claim] = None
    if facts.labels.get(label_key) != phase.value or notes:
        nodestatus.merge_metadata(api, node, labels={label_key: phase.value}, annotations=notes)
    text = message[:MAX_MESSAGE]
    wanted = nodestatus.NodeStatusCondition(condition_type(profile), CONDITION_STATUS[phase], reason, text)
    nodestatus.set_condition(api, node, wanted, current=facts)
    if phase in WARNING_PHASES:
        events.emit(
            api,
            node=node,
            node_uid=facts.uid,
            kind="Warning",
            reason=reason,
            action=phase.value,
            note=f"{profile}: {message}",
            key=event_key or "\x00".join((profile, phase.value, reason, message)),
        )


def ends_claim(phase: NodePhase, reason: str) -> bool:
    """Whether showing ``phase`` for ``reason`` drops the decision's start claim: the claim ends
    with the node workflow (a failed node stays cordoned, and the cordon counts from then on)."""
    return phase in FINAL_PHASES or reason == NodeReason.ABORTED


def claim(api: ApiClient, *, profile: str, node: str) -> None:
    """The decision's start claim, in the same patch as the in-progress label: other profiles count
    the claim against their budgets, and the node workflow's first ``publish`` then finds the label
    already set (one Node write per started node instead of two)."""
    nodestatus.merge_metadata(
        api,
        node,
        labels={status_label_key(profile): NodePhase.IN_PROGRESS.value},
        annotations={claim_key(profile): "true"},
    )


def release(api: ApiClient, *, profile: str, node: str) -> None:
    """Undo ``claim`` for a node the workflow did not start (a pause or abort arrived while it
    decided). No node workflow ran there since the claim, so the label is the claim's own."""
    nodestatus.merge_metadata(
        api, node, labels={status_label_key(profile): None}, annotations={claim_key(profile): None}
    )


async def show(
    executor: Executor,
    api: ApiClient,
    target: NodeTarget,
    *,
    phase: NodePhase,
    reason: str,
    message: str,
    annotations: Mapping[str, str] | None = None,
) -> None:
    """``publish`` for ``target``'s profile and node from an activity, on its Kubernetes thread pool:
    the activities' one way to show a node's state."""
    await blocking(
        executor,
        publish,
        api,
        profile=target.profile,
        node=target.node,
        phase=phase,
        reason=reason,
        message=message,
        annotations=annotations,
    )


async def lift(
    executor: Executor,
    api: ApiClient,
    target: NodeTarget,
    *,
    held: Collection[str],
    reason: str,
    message: str,
) -> bool:
    """Lift a waiting state this or an earlier attempt showed (the profile's node condition has a
    reason in ``held``) back to in-progress; say nothing when none shows. True if one was lifted."""
    facts, _ = await blocking(executor, nodestatus.read_node, api, target.node)
    current = facts.conditions.get(condition_type(target.profile))
    if current is None or current.reason not in held:
        return False
    await show(executor, api, target, phase=NodePhase.IN_PROGRESS, reason=reason, message=message)
    return True
