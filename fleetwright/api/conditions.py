"""The conditions of NodeProfile and DeploymentPolicy statuses (metav1.Condition-shaped, with the
helpers that find and set one) and the rollout phase; the condition types and reasons are ``keys``'.

Owns the shapes only; computing conditions from rollout state belongs to the controller.
Must not do I/O or read the clock (callers pass timestamps in).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, Strict

from fleetwright.api.common import ApiModel

ConditionStatus = Literal["True", "False", "Unknown"]

Phase = Literal[
    "Pending",
    "Progressing",
    "Paused",
    "Blocked",
    "Degraded",
    "Complete",
    "Halted",
    "Aborted",
    "Deleting",
    "RollingBack",
    "RolledBack",
]
"""The one rollout vocabulary: the NodeProfile's status.phase, ``fleetwright status`` and the
Events use these words (docs/status.md says what each means)."""

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(ApiModel):
    """One aspect of the object's current state, shaped exactly like metav1.Condition so that
    `kubectl wait --for=condition=Ready` and GitOps health checks work."""

    type: str = Field(
        description="Condition type in CamelCase, e.g. Ready, Progressing, Paused, Blocked, Degraded.",
        max_length=316,
        pattern=CONDITION_TYPE_PATTERN,
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None,
        description="The .metadata.generation this condition was computed from.",
        ge=0,
    )
    last_transition_time: Annotated[datetime, Strict(False)] = Field(
        description="When the status last changed (RFC 3339).",
    )
    reason: str = Field(
        description="A CamelCase machine-readable reason for the last transition, e.g. DrainBlocked.",
        min_length=1,
        max_length=1024,
        pattern=CONDITION_REASON_PATTERN,
    )
    message: str = Field(
        default="",
        description="A human-readable explanation (names blocking pods, PDBs, nodes...).",
        max_length=32768,
    )


def set_condition(conditions: list[Condition], new: Condition) -> list[Condition]:
    """Return ``conditions`` with ``new`` replacing the condition of the same type. The transition
    time is kept when the status did not change (metav1 semantics)."""
    out: list[Condition] = []
    replaced = False
    for cond in conditions:
        if cond.type != new.type:
            out.append(cond)
            continue
        replaced = True
        if cond.status == new.status:
            out.append(new.model_copy(update={"last_transition_time": cond.last_transition_time}))
        else:
            out.append(new)
    if not replaced:
        out.append(new)
    return out


def find_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of ``type_``, if present."""
    return next((c for c in conditions if c.type == type_), None)
