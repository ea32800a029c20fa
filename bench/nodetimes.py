"""Where a node workflow's time goes, read from its Temporal history (the rollout benchmark's
profile of one node's update).

For every activity the history records when it was scheduled, when a worker picked it up and when
it finished: the time queued (schedule to start) and the time it ran (start to finish). What is
left of the node's wall time is the orchestration between activities: the workflow tasks that
decide the next step and the server's dispatch. Pure over histories; the caller fetches them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from bench.harness import percentile


@dataclass
class NodeTimes:
    """One node workflow: its wall time and, per activity name, (queued, ran) seconds per run."""

    wall: float
    activities: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def queued(self) -> float:
        return sum(q for runs in self.activities.values() for q, _ in runs)

    @property
    def ran(self) -> float:
        return sum(r for runs in self.activities.values() for _, r in runs)


def node_times(history: WorkflowHistory) -> NodeTimes | None:
    """The breakdown of a closed node workflow's history (None for one still running)."""
    events = list(history.events)
    if not events or events[-1].event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return None

    def at(index: int) -> float:
        return events[index].event_time.ToDatetime().timestamp()

    by_id = {event.event_id: i for i, event in enumerate(events)}
    runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for i, event in enumerate(events):
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            continue
        done = event.activity_task_completed_event_attributes
        scheduled, started = by_id[done.scheduled_event_id], by_id[done.started_event_id]
        name = events[scheduled].activity_task_scheduled_event_attributes.activity_type.name
        runs[name.rsplit(".", 1)[-1]].append((at(started) - at(scheduled), at(i) - at(started)))
    return NodeTimes(wall=at(len(events) - 1) - at(0), activities=dict(runs))


def breakdown_lines(times: list[NodeTimes], ideal_node_seconds: float) -> list[str]:
    """The profile of a node's update over ``times`` (p50 / p90 across nodes)."""
    if not times:
        return ["per node (node workflow histories): none closed"]

    def p(values: list[float]) -> str:
        return f"p50 {percentile(values, 50):6.2f} s, p90 {percentile(values, 90):6.2f} s"

    walls = [t.wall for t in times]
    lines = [
        f"per node ({len(times)} node workflow histories; the stages' own time is {ideal_node_seconds:g} s):",
        f"  wall time                          {p(walls)}",
        f"  in activities                      {p([t.ran for t in times])}",
        f"  queued for a worker                {p([t.queued for t in times])}",
        f"  between activities (orchestration) {p([t.wall - t.ran - t.queued for t in times])}",
        "  by activity: runs per node, ran, queued",
    ]
    names = sorted({name for t in times for name in t.activities})
    for name in names:
        runs = [run for t in times for run in t.activities.get(name, [])]
        lines.append(
            f"    {name:22} {len(runs) / len(times):5.2f}  ran {p([r for _, r in runs])}; "
            f"queued p50 {percentile([q for q, _ in runs], 50):5.2f} s"
        )
    return lines
