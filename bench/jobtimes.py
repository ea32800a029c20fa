"""Where a node's time goes around its stage Jobs, from the apiserver's audit log (every write, to
the microsecond): fleetwright's create to the simulated pod running (the Job controller creates the
pod, kwok starts it), the stage itself (kwok), and fleetwright's reaction to the pod's success:
the next stage's Job on the same node, or, after the node's last stage, its Complete status.
fleetwright reads a stage's success off its pod, so the Job controller's own Complete status (also
shown) is not on the node's path.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.harness import actor, percentile, resource_of
from fleetwright.api.keys import NODE_LABEL

WORKER = "fleetwright-worker"
JOB_CONTROLLER = "kube-controller-manager (Job controller, GC)"
SIMULATOR = "kwok"


@dataclass(frozen=True)
class JobTimes:
    """One stage Job's moments."""

    node: str
    created: datetime
    running: datetime
    """The pod's first status write by kwok."""
    succeeded: datetime
    """The pod's last status write by kwok."""
    complete: datetime
    """The Job controller's last status write."""


@dataclass(frozen=True)
class NodeReaction:
    """Seconds fleetwright took to act on a stage pod's success on one node."""

    next_stage: list[float]
    """To create the node's next stage Job."""
    shown_complete: list[float]
    """After the node's last stage, to write its status label."""


def _at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event["stageTimestamp"]).replace("Z", "+00:00"))


def job_times(events: list[dict[str, Any]]) -> list[JobTimes]:
    """Every stage Job fleetwright created in ``events`` whose pod ran and whose Job completed."""
    created: dict[str, tuple[str, datetime]] = {}
    pod_writes: dict[str, list[datetime]] = {}
    job_writes: dict[str, list[datetime]] = {}
    for event in events:
        ref, who, what = event.get("objectRef") or {}, actor(event), resource_of(event)
        name = str(ref.get("name") or "")
        if who == WORKER and event.get("verb") == "create" and what == "jobs":
            labels = ((event.get("requestObject") or {}).get("metadata") or {}).get("labels") or {}
            created[name] = (str(labels.get(NODE_LABEL, "")), _at(event))
        elif who == SIMULATOR and what == "pods/status":
            # A Job's pod is named after it with a generated suffix.
            pod_writes.setdefault(name.rsplit("-", 1)[0], []).append(_at(event))
        elif who == JOB_CONTROLLER and what == "jobs/status":
            job_writes.setdefault(name, []).append(_at(event))
    times = []
    for job, (node, at) in created.items():
        pods, statuses = sorted(pod_writes.get(job, [])), sorted(job_writes.get(job, []))
        if pods and statuses and statuses[-1] >= pods[-1]:
            times.append(JobTimes(node, at, pods[0], pods[-1], statuses[-1]))
    return times


def reactions(times: Iterable[JobTimes], events: list[dict[str, Any]]) -> NodeReaction:
    """Per node, its Jobs in order: each one's pod success to the next Job's create, and the last
    one's to the worker's next status-label write on the Node."""
    by_node: dict[str, list[JobTimes]] = {}
    for job in times:
        if job.node:  # a create audited without its body names no node
            by_node.setdefault(job.node, []).append(job)
    labelled: dict[str, list[datetime]] = {}
    for event in events:
        body = event.get("requestObject") or {}
        if (
            actor(event) == WORKER
            and resource_of(event) == "nodes"
            and (body.get("metadata") or {}).get("labels")
        ):
            labelled.setdefault(str((event.get("objectRef") or {}).get("name")), []).append(_at(event))
    reaction = NodeReaction([], [])
    for node, jobs in by_node.items():
        jobs.sort(key=lambda job: job.created)
        reaction.next_stage.extend(
            (later.created - earlier.succeeded).total_seconds() for earlier, later in itertools.pairwise(jobs)
        )
        shown = [at for at in labelled.get(node, []) if at >= jobs[-1].succeeded]
        if shown:
            reaction.shown_complete.append((min(shown) - jobs[-1].succeeded).total_seconds())
    return reaction


def job_lines(times: list[JobTimes], reaction: NodeReaction, stage_seconds: float) -> list[str]:
    if not times:
        return ["stage Jobs: none complete in the audit log"]

    def spread(values: list[float]) -> str:
        if not values:
            return "none"
        return f"p50 {percentile(values, 50):5.2f} s, p90 {percentile(values, 90):5.2f} s"

    def seconds(since: str, until: str) -> list[float]:
        return [(getattr(t, until) - getattr(t, since)).total_seconds() for t in times]

    return [
        f"around the stage Jobs ({len(times)}; from the audit log):",
        f"  Job created -> pod running (Job controller, kwok)      {spread(seconds('created', 'running'))}",
        f"  pod running -> succeeded (kwok; the stage is {stage_seconds:g} s)    "
        f"{spread(seconds('running', 'succeeded'))}",
        f"  pod succeeded -> next stage's Job (fleetwright)        {spread(reaction.next_stage)}",
        f"  last pod succeeded -> node's label (fleetwright)       {spread(reaction.shown_complete)}",
        "  pod succeeded -> Job Complete (Job controller; unused) "
        + spread(seconds("succeeded", "complete")),
    ]
