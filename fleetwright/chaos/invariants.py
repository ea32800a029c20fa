"""The safety invariants a rollout must keep whatever breaks, as pure checks over the snapshots the
watcher recorded (oldest first). Each check returns the violations it found, each naming the
invariant, the moment and what was seen; an empty list means the invariant held.

Pure: no I/O, no clock (snapshot times come from the watcher). What counts as "ours" follows the
product's own markers: the cordon marker ``fleetwright.io/cordon.<profile>``, the recorded state
``fleetwright.io/state.<profile>``, the stage Jobs' labels and annotations, the node condition
``fleetwright.io/<profile>`` and the NodeProfile's status conditions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleetwright.api.keys import CORDON_PREFIX, claim_key, condition_type
from fleetwright.chaos.snapshot import JobView, NodeView, ProfileView, Snapshot

BUDGET = "budget"
FOREIGN_CORDON = "foreign-cordon"
DUPLICATE_JOB = "duplicate-stage-job"
ENDED = "rollout-ended"
LEFT_BEHIND = "left-behind"
BLOCKED_VISIBLE = "blocked-visible"
INTERRUPTED_ONCE = "workload-interrupted-once"
INVARIANTS = (BUDGET, FOREIGN_CORDON, DUPLICATE_JOB, ENDED, LEFT_BEHIND, BLOCKED_VISIBLE, INTERRUPTED_ONCE)
FINAL_PHASES = frozenset({"Complete", "Degraded", "Halted", "Aborted", "RolledBack"})
VISIBLE_WITHIN_SECONDS = 30.0

Outage = tuple[float, float]
"""(start, end) on the watcher's clock while an injected fault kept the engine from acting."""


@dataclass(frozen=True)
class Violation:
    invariant: str
    at: float
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} at {self.at:.1f}s: {self.detail}"


def disrupted_by(nodes: Sequence[NodeView], profile: str) -> list[str]:
    """Nodes the profile has cordoned or is working on right now (what its budget pays for)."""
    return [n.name for n in nodes if n.cordoned_by(profile) or n.working(profile)]


def budget(timeline: Sequence[Snapshot], profile: str, max_unavailable: int) -> list[Violation]:
    """Nodes disrupted by the profile never exceed ``maxUnavailable`` (one violation per distinct
    over-budget set, so a long-lasting breach is reported once)."""
    out: list[Violation] = []
    last: frozenset[str] = frozenset()
    for snap in timeline:
        disrupted = frozenset(disrupted_by(snap.nodes, profile))
        if len(disrupted) > max_unavailable and disrupted != last:
            names = ", ".join(sorted(disrupted))
            out.append(
                Violation(BUDGET, snap.at, f"{len(disrupted)} > maxUnavailable {max_unavailable}: {names}")
            )
        last = disrupted if len(disrupted) > max_unavailable else frozenset()
    return out


def foreign_cordons(
    timeline: Sequence[Snapshot], released: Mapping[str, float] | None = None
) -> list[Violation]:
    """A node seen cordoned by someone else (unschedulable, no fleetwright cordon marker) is never
    seen schedulable again, unless that someone released it (``released``: node -> when the third
    party began its uncordon); so a foreign cordon that turns schedulable earlier was lifted by us."""
    released = released or {}
    out: list[Violation] = []
    foreign_since: dict[str, float] = {}
    for snap in timeline:
        for node in snap.nodes:
            if node.foreign_cordon:
                foreign_since.setdefault(node.name, snap.at)
            elif node.name in foreign_since and not node.unschedulable:
                since = foreign_since.pop(node.name)
                if snap.at < released.get(node.name, float("inf")):
                    detail = f"{node.name} cordoned by someone else at {since:.1f}s is schedulable"
                    out.append(Violation(FOREIGN_CORDON, snap.at, detail))
    return out


def duplicate_jobs(timeline: Sequence[Snapshot], profile: str) -> list[Violation]:
    """No two stage Jobs (distinct uids) for the same node, package, version, stage and generation."""
    seen: dict[tuple[str, ...], dict[str, JobView]] = defaultdict(dict)
    first_at: dict[str, float] = {}
    for snap in timeline:
        for job in snap.jobs:
            if job.profile == profile:
                seen[job.key].setdefault(job.uid, job)
                first_at.setdefault(job.uid, snap.at)
    out = []
    for key, jobs in sorted(seen.items()):
        if len(jobs) > 1:
            names = ", ".join(sorted(f"{j.name}({uid[:8]})" for uid, j in jobs.items()))
            at = max(first_at[uid] for uid in jobs)
            _, node, package, version, stage, generation = key
            out.append(
                Violation(
                    DUPLICATE_JOB,
                    at,
                    f"{len(jobs)} Jobs for {node} {package}@{version} {stage} gen {generation}: {names}",
                )
            )
    return out


def rollout_ended(final: ProfileView | None, at: float) -> list[Violation]:
    """The rollout ended Complete, Degraded (complete with nodes not updated) or Failed (halted), for
    the current generation, with a Ready condition that gives a reason; a halt also says why."""
    if final is None:
        return [Violation(ENDED, at, "the NodeProfile has no status")]
    if final.phase not in FINAL_PHASES:
        return [Violation(ENDED, at, f"did not end: phase {final.phase or 'none'}")]
    if final.generation is not None and final.observed_generation != final.generation:
        return [
            Violation(ENDED, at, f"ended for generation {final.observed_generation}, not {final.generation}")
        ]
    reason = final.conditions.get("Ready", ("", "", ""))[1]
    if not reason:
        return [Violation(ENDED, at, f"phase {final.phase} without a Ready reason")]
    if final.phase in ("Halted", "Degraded", "RolledBack"):
        degraded = final.conditions.get("Degraded", ("", "", ""))
        if degraded[0] != "True" or not degraded[1] or not degraded[2]:
            return [Violation(ENDED, at, f"phase {final.phase} without a Degraded reason and message")]
    return []


def left_behind(final: Snapshot, profile: str) -> list[Violation]:
    """After the rollout ended no node is cordoned by it, carries its stale cordon marker, its start
    claim (which every other profile counts against its budget) or a fleetwright taint. A node the
    status names as failed stays cordoned by design (nothing may land on a half-changed host), so
    that one cordon is allowed; its claim is not: it ends with the node workflow, however that
    ended (terminated too)."""
    failed = set(final.profile.failed_nodes if final.profile else ())
    out = []
    for node in final.nodes:
        if claim_key(profile) in node.annotations:
            out.append(Violation(LEFT_BEHIND, final.at, f"{node.name} left claimed (its start claim)"))
        if node.cordoned_by(profile) and node.name not in failed:
            out.append(Violation(LEFT_BEHIND, final.at, f"{node.name} left cordoned (not a failed node)"))
        elif not node.unschedulable and any(k.startswith(CORDON_PREFIX) for k in node.annotations):
            out.append(
                Violation(LEFT_BEHIND, final.at, f"{node.name} schedulable with a stale cordon marker")
            )
        if node.our_taints():
            out.append(
                Violation(LEFT_BEHIND, final.at, f"{node.name} left tainted: {', '.join(node.our_taints())}")
            )
    return out


def visible(snap: Snapshot, node: str, profile: str) -> bool:
    """A human can see that ``node`` is stuck: its fleetwright condition is False (blocked or
    failed), the profile's Blocked condition names it, or the status lists it as failed."""
    view = snap.node(node)
    if view is not None and view.conditions.get(condition_type(profile), ("", ""))[0] == "False":
        return True
    if snap.profile is None:
        return False
    status, _, message = snap.profile.conditions.get("Blocked", ("", "", ""))
    return (status == "True" and node in message) or node in snap.profile.failed_nodes


def _deadline(start: float, outages: Sequence[Outage], within: float) -> float:
    deadline = start + within
    for begin, end in sorted(outages):
        if begin < deadline and end > start:
            deadline = max(deadline, end + within)  # the clock restarts once the engine is back
    return deadline


def blocked_visible(
    timeline: Sequence[Snapshot],
    profile: str,
    outages: Sequence[Outage] = (),
    within: float = VISIBLE_WITHIN_SECONDS,
) -> list[Violation]:
    """Every blocked wait (a stage pod that cannot pull its image) is visible as a condition within
    ``within`` seconds of its start; time the engine was down by injection does not count."""
    starts: dict[str, float] = {}
    for snap in timeline:
        for pod in snap.pods:
            if pod.pulling_forever and pod.node:
                starts.setdefault(pod.node, snap.at)
    out = []
    end = timeline[-1].at if timeline else 0.0
    for node, start in sorted(starts.items()):
        deadline = _deadline(start, outages, within)
        if deadline > end:
            continue  # the run ended first: rollout_ended judges that
        if not any(start <= s.at <= deadline and visible(s, node, profile) for s in timeline):
            out.append(
                Violation(
                    BLOCKED_VISIBLE,
                    deadline,
                    f"{node}: image pull wait since {start:.1f}s not visible after {deadline - start:.0f}s",
                )
            )
    return out


def interrupted_once(
    timeline: Sequence[Snapshot], profile: str, max_unavailable: int, workloads: Mapping[str, frozenset[str]]
) -> list[Violation]:
    """A workload (name -> its nodes, as placed before the rollout) whose nodes fit in
    ``maxUnavailable`` is interrupted at most once: the nodes the profile cordoned (its drain
    follows) among its nodes never go from none to some a second time. A workload on a node the
    status names as failed is left out (a failed node is left cordoned; what follows is a human's
    call)."""
    failed = set(timeline[-1].profile.failed_nodes if timeline and timeline[-1].profile else ())
    out = []
    for name, nodes in sorted(workloads.items()):
        if len(nodes) > max_unavailable or nodes & failed:
            continue
        starts: list[float] = []
        down = False
        for snap in timeline:
            now_down = any(n.name in nodes and n.cordoned_by(profile) for n in snap.nodes)
            if now_down and not down:
                starts.append(snap.at)
            down = now_down
        if len(starts) > 1:
            at = ", ".join(f"{s:.1f}s" for s in starts)
            detail = f"{name} ({len(nodes)} nodes, maxUnavailable {max_unavailable}) interrupted at {at}"
            out.append(Violation(INTERRUPTED_ONCE, starts[1], detail))
    return out


def check_run(
    timeline: Sequence[Snapshot],
    profile: str,
    max_unavailable: int,
    outages: Sequence[Outage] = (),
    released: Mapping[str, float] | None = None,
    *,
    workloads: Mapping[str, frozenset[str]] | None = None,
) -> list[Violation]:
    """Every invariant over one rollout's timeline (the last snapshot is taken after it ended)."""
    if not timeline:
        return [Violation(ENDED, 0.0, "nothing was observed")]
    final = timeline[-1]
    return [
        *budget(timeline, profile, max_unavailable),
        *foreign_cordons(timeline, released),
        *duplicate_jobs(timeline, profile),
        *rollout_ended(final.profile, final.at),
        *left_behind(final, profile),
        *blocked_visible(timeline, profile, outages),
        *interrupted_once(timeline, profile, max_unavailable, workloads or {}),
    ]
