"""The package state fleetwright records on a Node, and its annotation format.

Owns the pure parse/format pair for the annotation the node workflow writes; the engine writes it,
the planner reads it. Must not talk to the API server.

Format (one annotation per profile, so exactly one writer per key: the node workflow of that
profile on that node; two profiles never rewrite each other's state, NodeWright PR #413)::

    fleetwright.io/state.<profile>: {"v":1,"profile":"<profile>","packages":{
        "<name>": {"version": "1.2.0",                 # installed and verified; null = not installed
                   "config": {"<key>": "<digest>"},    # config digests that version completed with
                   "pending": {                        # present while a change is under way
                       "version": "1.3.0", "config": {...},
                       "stages": ["upgrade", "config", "interrupt", "post-interrupt"],
                       "done": ["upgrade"],            # stages whose check passed
                       "failed": "config-check exited 1"},     # set when the change failed
                   "before": {                         # what the last rollout to change it replaced
                       "target": "<digest>", "since": "<time>",
                       "version": "1.1.0", "config": {...}}}}}  # version null = it was not installed

The value is compact JSON with sorted keys. The key is ``keys.state_key``: a long profile name is
shortened in it (``keys.qualified``), and the full name is kept in the value.
Digests are ``sha256(value)[:16]`` of each config value (``packages.digest``).
``before`` is written with the first record of a change and kept after it completes, until another
rollout changes the package or a rollback of that rollout returns it (``planner.rollout.rollback``): it is
how a rollback knows which nodes its rollout changed and what they carried before.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from datetime import datetime

from pydantic import Field, ValidationError

from fleetwright.api.keys import state_key
from fleetwright.errors import InvalidSpecError
from fleetwright.planner.base import Frozen
from fleetwright.planner.node.stages import Stage

FORMAT_VERSION = 1


class PendingChange(Frozen):
    """A change toward a target (version + config) that has started but not completed."""

    version: str
    config: dict[str, str] = Field(default_factory=dict)
    stages: tuple[Stage, ...] = ()
    done: tuple[Stage, ...] = ()
    failed: str | None = None

    def remaining(self) -> tuple[Stage, ...]:
        return tuple(stage for stage in self.stages if stage not in self.done)


class Before(Frozen):
    """What a package was on the node before a rollout changed it. The rollout is named by its
    target and by when that target began (``RolloutState.since``), so a later rollout of an equal
    spec is another rollout."""

    target: str
    since: datetime
    version: str | None = None
    """None: the package was not installed."""
    config: dict[str, str] = Field(default_factory=dict)

    def by(self, target: str, since: datetime) -> bool:
        return self.target == target and self.since == since


class PackageRecord(Frozen):
    """What a node carries of one package."""

    version: str | None = None
    config: dict[str, str] = Field(default_factory=dict)
    pending: PendingChange | None = None
    before: Before | None = None


class NodePackageState(Frozen):
    """All packages one profile recorded on one node."""

    v: int = FORMAT_VERSION
    profile: str
    packages: dict[str, PackageRecord] = Field(default_factory=dict)


def record_key(record: PackageRecord | None) -> Hashable:
    """A cheap hashable identity of a record (equal records with equally ordered config maps give
    equal keys), for memoising per-record planning across a fleet."""
    if record is None:
        return None
    pending = record.pending.model_dump_json() if record.pending is not None else None
    before = record.before.model_dump_json() if record.before is not None else None
    return (record.version, tuple(record.config.items()), pending, before)


def format_annotation(state: NodePackageState) -> tuple[str, str]:
    """The (key, value) to write on the Node for ``state``. A record with no ``before`` omits it
    (the field came later: such records read as they always did)."""
    raw = state.model_dump(mode="json", exclude_defaults=False)
    for record in raw["packages"].values():
        if record["before"] is None:
            del record["before"]
    value = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    return state_key(state.profile), value


def parse_annotation(key: str, value: str) -> NodePackageState:
    """Read one state annotation; a malformed value is an error that names the key (a corrupt record
    must stop work on that node, never be mistaken for 'nothing installed')."""
    try:
        raw = json.loads(value)
        state = NodePackageState.model_validate(raw)
    except (ValueError, ValidationError) as err:
        raise InvalidSpecError(
            [(f"metadata.annotations[{key}]", f"unreadable package state: {err}")]
        ) from err
    if state.v != FORMAT_VERSION:
        raise InvalidSpecError([(f"metadata.annotations[{key}]", f"unknown state format v{state.v}")])
    if state_key(state.profile) != key:
        raise InvalidSpecError([(f"metadata.annotations[{key}]", f"records profile {state.profile!r}")])
    return state


def read_profile_state(annotations: Mapping[str, str], profile: str) -> NodePackageState:
    """The state ``profile`` recorded on a node with these annotations (empty if none)."""
    key = state_key(profile)
    value = annotations.get(key)
    if value is None:
        return NodePackageState(profile=profile)
    return parse_annotation(key, value)
