"""What the operator commands answer: one model per answer, printed as JSON or YAML with
``-o json|yaml`` and rendered by the command for a human (``pause`` ... ``skip-node``, ``node reset``,
``logs``, ``history``, ``campaign status``; ``status`` has its own view in ``fleetwright.cli.statusview``).

Kept out of the command modules, which every ``--help`` imports (the root's imports them all), so
pydantic is imported only when a command runs. Owns the models; it must not read or print.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from fleetwright.workflows.payloads import CampaignProgress


class Acted(BaseModel):
    """What a control command did (its ``-o json|yaml`` output)."""

    profile: str
    action: str
    via: str
    """``annotation fleetwright.io/paused`` or ``update <name>`` / ``signal <name>``."""
    result: str


class NodeReset(BaseModel):
    node: str
    profile: str
    cleared: list[str] = Field(default_factory=list)
    """The annotation and label keys removed and the stage Jobs deleted (``job/<name>``)."""
    rollout_nudged: bool = False
    result: str


class ContainerLog(BaseModel):
    job: str
    package: str
    stage: str
    result: str
    pod: str
    container: str
    log: str
    never_started: str | None = None
    """Why the container never ran (it has no log), e.g. PodInitializing after a failed step."""


class Run(BaseModel):
    """One node workflow: one profile's update of this node toward one target."""

    workflow_id: str
    run_id: str
    profile: str
    status: str
    phase: str = ""
    packages: list[str] = Field(default_factory=list)
    started: datetime | None = None
    closed: datetime | None = None
    result: str = ""


class StageRun(BaseModel):
    profile: str
    package: str
    stage: str
    job: str
    started: datetime | None = None
    finished: datetime | None = None
    result: str


class Recorded(BaseModel):
    """What a profile recorded on the node, and the node condition it shows."""

    profile: str
    packages: dict[str, str] = Field(default_factory=dict)
    condition: str = ""


class NodeHistory(BaseModel):
    node: str
    recorded: list[Recorded] = Field(default_factory=list)
    runs: list[Run] = Field(default_factory=list)
    stages: list[StageRun] = Field(default_factory=list)


class CampaignView(BaseModel):
    """``fleetwright campaign status`` (its ``-o json|yaml`` output)."""

    progress: CampaignProgress
    unreachable: dict[str, str] = {}
    """cluster -> why its rollout cannot reach it."""
