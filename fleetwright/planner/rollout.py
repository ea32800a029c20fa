"""The rollout engine: ``decide(state, observations, now) -> Decision``.

Each call folds the observed outcomes of running nodes into the state, applies the failure rules,
then walks the steps (rollout-wide gates first, then every compartment's own steps) and returns
which nodes to start now, the new state, and when to call again. It is a pure function of its
arguments: same inputs, same decision; no I/O, no clock, no randomness.

Invariants (each is a property test):
- a start never takes the unavailable count past ``maxUnavailable`` (profile-wide or per
  compartment); nodes unavailable for other reasons count.
- canary nodes finish before any other node starts; a failed canary halts.
- a halt is absorbing: a halted state never starts a node again (a new target starts a new state).
- a node starts only if its expected duration fits the rest of an open window.
- a rollout is never Blocked on its own failed nodes alone: when a budget refuses a start and only
  nodes this rollout failed on (left cordoned) hold it, the failure rule fires.

How the engine uses it: keep the state; whenever a child finishes, a signal arrives or ``wake_at``
passes, observe and call ``decide``; start ``decision.start``; store ``decision.state``. A spec
change goes through ``retarget``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from datetime import datetime, timedelta

from fleetwright.planner.batches import BatchState, evaluate_batch, next_batch_size, record_nodes
from fleetwright.planner.budget import BUDGET, BudgetTracker, Refusal
from fleetwright.planner.nodework import NodeWork
from fleetwright.planner.observations import Observations, RunStatus
from fleetwright.planner.policy import (
    DEFAULT_COMPARTMENT,
    GATES_SCOPE,
    ApprovalStep,
    BatchesStep,
    CanaryStep,
    FailurePolicy,
    HealthGate,
    RolloutPolicy,
    SoakStep,
    Step,
)
from fleetwright.planner.rollback import fires, rollback_of, rollback_spec
from fleetwright.planner.rolloutstate import (
    MAX_BLOCKED_LISTED,
    BlockedNode,
    Counts,
    Decision,
    FailedNode,
    Halt,
    NodeRun,
    NodeStart,
    Phase,
    RolloutState,
    ScopeState,
)
from fleetwright.planner.spec import RolloutSpec
from fleetwright.planner.targets import FleetView, Prepared
from fleetwright.planner.windows import ensure_aware, longest_remaining, next_fit

# At most this many nodes start per decision (see ``_Engine._capped``), and the next decision
# comes this long after a capped one.
MAX_STARTS_PER_DECISION = 200
CAPPED_RETRY = timedelta(seconds=1)


def begin(
    spec: RolloutSpec, now: datetime, previous: RolloutState | None = None, unreported: Iterable[str] = ()
) -> RolloutState:
    """A fresh rollout of ``spec``. Nodes still running for ``previous`` are carried over: they keep
    holding budget until they finish, so a spec change never bypasses the cap. So are
    ``unreported``: nodes ``previous`` counted as failed from their records whose node workflows
    have not reported yet (they are still finishing, so none may start on them)."""
    ensure_aware(now)
    names = sorted([DEFAULT_COMPARTMENT, *(c.name for c in spec.policy.compartments)])
    earlier: tuple[str, ...] = ()
    since = now
    if previous is not None:
        running = {run.node for run in previous.running}
        earlier = tuple(sorted(set(previous.running_for_earlier_target) | running | set(unreported)))
        if previous.spec.target == spec.target:
            since = previous.rollout_since  # another pass of the same rollout
    return RolloutState(
        spec=spec,
        started_at=now,
        since=since,
        gates=ScopeState(name=GATES_SCOPE),
        compartments=tuple(_fresh_scope(spec.policy, name, previous) for name in names),
        running_for_earlier_target=earlier,
    )


def _fresh_scope(policy: RolloutPolicy, name: str, previous: RolloutState | None) -> ScopeState:
    """A compartment's progress at the start of a rollout: none, except the size of the last batch
    the previous rollout ran there when its batches do not reset (``reset_batch_size``)."""
    before = previous.scope(name) if previous is not None else None
    steps = [s for s in policy.compartment_steps(name) if isinstance(s, BatchesStep)]
    if before is None or not steps or steps[0].reset_batch_size or before.batch.last_size == 0:
        return ScopeState(name=name)
    return ScopeState(name=name, batch=BatchState(last_size=before.batch.last_size))


def retarget(state: RolloutState, spec: RolloutSpec, now: datetime) -> RolloutState:
    """Apply a spec change. New packages (a new target) start a new rollout, with a new canary;
    a policy-only change keeps the progress and continues under the new policy. The spec a
    rollback returned from (re-applied, or edited in its policy only) does not start again: the
    rollback stays, under the new policy, until a spec with other packages comes."""
    of = state.spec.rollback
    if of is not None and spec.target == of.target:
        spec = rollback_spec(spec, of)
    if spec.target != state.spec.target:
        return begin(spec, now, previous=state)
    scopes = {c.name for c in spec.policy.compartments} | {DEFAULT_COMPARTMENT}
    kept = [s for s in state.compartments if s.name in scopes]
    added = [ScopeState(name=n) for n in sorted(scopes - {s.name for s in kept})]
    return state.model_copy(
        update={"spec": spec, "compartments": tuple(sorted(kept + added, key=lambda s: s.name))}
    )


def decide(
    state: RolloutState,
    observations: Observations,
    now: datetime,
    prepared: Prepared | None = None,
    max_starts: int = MAX_STARTS_PER_DECISION,
) -> Decision:
    """The next decision. ``prepared`` (``Prepared(spec, observations)``) may be reused across calls
    while the nodes' names, labels and recorded package state are unchanged; it must have been built
    for ``state.spec``. At most ``max_starts`` nodes start per decision; a batch wider than that
    fills over the next decisions, the first a second later (``wake_at``).

    When a budget (profile-wide or a compartment's) refuses a start and only nodes this rollout
    failed on hold it, that scope's failure rule fires at once: no node it caps can ever start, so
    the rollout could never complete."""
    ensure_aware(now)
    if prepared is not None and prepared.spec.target != state.spec.target:
        raise ValueError("prepared was built for another spec target")
    view = FleetView(state.spec, observations, prepared)
    state = _absorb(state, view)
    engine = _Engine(state, view, observations, now, max_starts)
    if state.halt is None:
        state = engine.check_failures(state)
    if state.halt is None and not observations.paused:
        state = engine.run(state)
    if fires(state):
        # The failure rule fired with action rollback: from this very decision on, the rollout
        # returns what it changed (a new state toward the rollback's target, planned afresh).
        # A failure read from a node's record can come before its workflow's report: that node is
        # returned once its workflow has ended.
        unreported = view.reported_running.intersection(f.node for f in state.failed)
        rollback = begin_rollback(state, now, unreported)
        return decide(rollback, observations, now, max_starts=max_starts)
    if state.halt is not None:
        return engine.decision(state, Phase.HALTED, _halted(state))
    if observations.paused:
        return engine.decision(state, Phase.PAUSED, "paused")
    return engine.conclude(state)


def begin_rollback(state: RolloutState, now: datetime, unreported: Iterable[str] = ()) -> RolloutState:
    """The rollback of ``state``'s rollout, starting now. Its nodes still running (``unreported``
    too: see ``begin``) keep holding the budget until they finish; then they are returned too."""
    return begin(rollback_spec(state.spec, rollback_of(state)), now, previous=state, unreported=unreported)


def _halted(state: RolloutState) -> str:
    assert state.halt is not None
    of = state.spec.rollback
    if of is None:
        return state.halt.reason
    return f"the rollback failed: {state.halt.reason} (it was rolling back: {of.reason})"


# ---------------------------------------------------------------------------------------------
# Folding outcomes in


def _absorb(state: RolloutState, view: FleetView) -> RolloutState:
    """Move finished runs to updated/failed and count them in their scopes."""
    still: list[NodeRun] = []
    newly: set[str] = set()
    failed = list(state.failed)
    scopes = {s.name: s for s in (state.gates, *state.compartments)}
    for run in state.running:
        obs = view.nodes.get(run.node)
        if obs is None or obs.run is RunStatus.GONE:
            # The node left the fleet (deleted, or no longer targeted): nothing to wait for, and no
            # failure to count against the budgets. A node re-registered under the name is new work.
            continue
        work = view.work[run.node]
        if obs.run is RunStatus.FAILED or work.failed is not None:
            failed.append(
                FailedNode(node=run.node, scope=run.scope, message=obs.message or work.failed or "")
            )
            ok = False
        elif obs.run is RunStatus.SUCCEEDED or (obs.run is None and not work.needs_work):
            # A node is done when its workflow says so. Its recorded state needing no work is not
            # enough while the workflow runs: it still uncordons and releases the runtime taint
            # after recording the last stage. Only a node whose status nobody reports (a caller
            # without node workflows) is judged by its record alone.
            newly.add(run.node)
            ok = True
        else:
            still.append(run)
            continue
        _count_finished(scopes, view.compartment_of[run.node], run, ok)
    earlier = tuple(
        n
        for n in state.running_for_earlier_target
        if n in view.nodes and view.nodes[n].run is RunStatus.RUNNING
    )
    return state.model_copy(
        update={
            "running": tuple(still),
            "updated": tuple(sorted(newly.union(state.updated))) if newly else state.updated,
            "failed": tuple(sorted(failed, key=lambda f: f.node)),
            "running_for_earlier_target": earlier,
            "gates": scopes[state.gates.name],
            "compartments": tuple(scopes[s.name] for s in state.compartments),
        }
    )


def _count_finished(scopes: dict[str, ScopeState], compartment: str, run: NodeRun, ok: bool) -> None:
    scope = scopes.get(compartment)
    if scope is None:
        return
    update: dict[str, object] = {
        "batch": record_nodes(scope.batch, succeeded=int(ok), failed=int(not ok)),
    }
    if run.scope == compartment and run.node in scope.current:
        key = "current_succeeded" if ok else "current_failed"
        update[key] = getattr(scope, key) + 1
    scopes[compartment] = scope.model_copy(update=update)


# ---------------------------------------------------------------------------------------------
# The engine for one call


class _Engine:
    def __init__(
        self,
        state: RolloutState,
        view: FleetView,
        observations: Observations,
        now: datetime,
        max_starts: int = MAX_STARTS_PER_DECISION,
    ) -> None:
        if max_starts < 1:
            raise ValueError("max_starts must be at least 1")
        self.max_starts = max_starts
        self.view = view
        self.observations = observations
        self.now = now
        self.policy = state.spec.policy
        self.running = {run.node for run in state.running}
        self.updated = set(state.updated)
        self.failed = {f.node: f for f in state.failed}
        self.earlier = set(state.running_for_earlier_target)
        busy = self.running | self.earlier | view.reported_running
        self.tracker = BudgetTracker(
            view.foreign_unavailable,
            view.compartment_of,
            view.cap,
            view.compartment_caps,
            ours=busy,
            reporting=self.running,
            failed=_left_failed(view, [*self.failed, *view.prepared.failed_earlier], busy),
        )
        self.pending = (
            view.prepared.needing
            - busy
            - self.updated
            - self.failed.keys()
            - view.prepared.failed_earlier.keys()
        )
        self.starts: list[NodeStart] = []
        self.waits: list[datetime] = []
        # Nodes that need work and cannot start now, and why: blocked (only a change outside the
        # rollout lets them start) or waiting (they start by themselves once the rollout's own
        # work frees budget, or a window opens). A node is in one of them at most.
        self.blocked: dict[str, str] = {}
        self.waiting: dict[str, str] = {}
        # (refusal, members, from index): the rest of a compartment found the cap full; their
        # reasons are filled in only when the decision is assembled (a full cap must not cost O(n)
        # refusals).
        self.budget_waits: list[tuple[Refusal, list[str], int]] = []
        # Something only a fresh observation of the fleet shows can change this decision
        # (``Decision.watch_fleet``); blocked nodes count by themselves.
        self.watch_fleet = bool(self.earlier)
        self.notes: list[str] = []
        self.halt: Halt | None = None
        # Scope -> the refusal of a budget that only this rollout's failed nodes hold.
        self.held_by_failed: dict[str, str] = {}
        self.window_left = longest_remaining(self.policy.windows, now)
        self._fit_cache: dict[int, datetime | None] = {}
        self.held_since = dict(state.held_for_workloads)

    # -- failure rules ------------------------------------------------------------------------

    def check_failures(self, state: RolloutState) -> RolloutState:
        canaries = {n for s in (state.gates, *state.compartments) for n in s.canary or ()}
        broken = [f for f in state.failed if f.node in canaries]
        if broken:
            # A failed canary fires the failure action whatever maxFailedNodes says.
            detail = "; ".join(f"{f.node}: {f.message}" if f.message else f.node for f in broken)
            failure = self.policy.failure_for(broken[0].scope)
            halt = Halt(
                reason=f"canary failed ({detail})", action=failure.action, scope=broken[0].scope, at=self.now
            )
            return state.model_copy(update={"halt": halt})
        total = len(state.failed)
        if _exceeded(self.policy.failure, total):
            return self._halted(
                state,
                f"{total} node(s) failed (maxFailedNodes {self.policy.failure.max_failed_nodes})",
                self.policy.failure,
                GATES_SCOPE,
            )
        for compartment in self.policy.compartments:
            if compartment.failure is None:
                continue
            count = sum(1 for f in state.failed if self.view.compartment_of.get(f.node) == compartment.name)
            if _exceeded(compartment.failure, count):
                reason = f"compartment {compartment.name}: {count} node(s) failed"
                return self._halted(state, reason, compartment.failure, compartment.name)
        return state

    def _halted(self, state: RolloutState, reason: str, failure: FailurePolicy, scope: str) -> RolloutState:
        if state.failed:
            first = state.failed[0]
            reason += f"; first: {first.node}" + (f" ({first.message})" if first.message else "")
        halt = Halt(reason=reason, action=failure.action, scope=scope, at=self.now)
        return state.model_copy(update={"halt": halt})

    def halt_now(self, reason: str, scope: str) -> None:
        if self.halt is None:
            failure = self.policy.failure_for(scope) if scope != GATES_SCOPE else self.policy.failure
            self.halt = Halt(reason=reason, action=failure.action, scope=scope, at=self.now)

    # -- walking the steps --------------------------------------------------------------------

    def run(self, state: RolloutState) -> RolloutState:
        gates = self._scope(state.gates, self.policy.gate_steps(), self._queue(self.view.order))
        compartments = list(state.compartments)
        if self.halt is None and gates.step >= len(self.policy.gate_steps()):
            for index, scope in enumerate(compartments):
                if self.halt is not None:
                    break
                queue = self._queue(self.view.members.get(scope.name, []))
                compartments[index] = self._scope(scope, self.policy.compartment_steps(scope.name), queue)
        if self.halt is None and self.held_by_failed:
            self._fire_held_by_failed()
            # As if the walk never happened: no start, no batch opened for nodes that never ran.
            self.starts = []
            return state.model_copy(update={"halt": self.halt})
        if self.halt is not None:
            self.starts = []  # a halt found later in this call cancels this call's starts too
        running = state.running + tuple(
            NodeRun(node=s.node, scope=s.scope, batch=s.batch, started_at=self.now) for s in self.starts
        )
        return state.model_copy(
            update={
                "gates": gates,
                "compartments": tuple(compartments),
                "running": tuple(sorted(running, key=lambda r: r.node)),
                "halt": self.halt,
                "held_for_workloads": {n: t for n, t in self.held_since.items() if n in self.pending},
            }
        )

    def _fire_held_by_failed(self) -> None:
        """A budget is full of nodes this rollout failed on: nothing it runs or waits for frees it,
        so no node it caps can ever start, and a failure rule tolerating that many failures can
        never fire by count. The rollout cannot complete; that is its failure (docs/status.md)."""
        scope, refusal = next(iter(self.held_by_failed.items()))
        failure = self.policy.failure if scope == GATES_SCOPE else self.policy.failure_for(scope)
        tolerated = failure.max_failed_nodes
        why = "" if tolerated is None else f" (maxFailedNodes {tolerated} tolerates them)"
        held = refusal.removeprefix(f"{BUDGET}: ")
        self.halt_now(f"no node can start: {held}; only this rollout's failed nodes hold it{why}", scope)

    def _queue(self, members: list[str]) -> list[str]:
        """The members still pending, in rollout order (one pass per scope and call; afterwards
        ``self.pending`` membership tells which of them started meanwhile)."""
        return [n for n in members if n in self.pending]

    def _running_in(self, scope: str) -> int:
        if scope == GATES_SCOPE:
            return len(self.running)
        return sum(1 for n in self.running if self.view.compartment_of.get(n) == scope)

    def _scope(self, scope: ScopeState, steps: tuple[Step, ...], members: list[str]) -> ScopeState:
        if scope.step < len(steps) and not self._has_work(members, scope):
            # Nothing to do in this scope: skip its soaks and approvals rather than wait for nothing.
            return scope.model_copy(update={"step": len(steps)})
        while scope.step < len(steps) and self.halt is None:
            if scope.entered_at is None:
                scope = scope.model_copy(update={"entered_at": self.now})
            scope, done = self._step(scope, steps[scope.step], members)
            if not done:
                break
            scope = scope.model_copy(update={"step": scope.step + 1, "entered_at": None})
        return scope

    def _has_work(self, queue: list[str], scope: ScopeState) -> bool:
        if scope.open or scope.canary:
            return True
        return (
            any(n in self.pending for n in queue)
            or self._running_in(scope.name) > 0
            or self._finishing_in(scope.name) > 0
        )

    def _finishing_in(self, scope: str) -> int:
        """Nodes of ``scope`` still running for an earlier target. The scope cannot be done while
        they run: once they end they may need this rollout's work (a rollback returns a node that
        was still failing its forward change when the rule fired)."""
        if scope == GATES_SCOPE:
            return 0  # the gates try the new change on nodes that can start now; these cannot
        return sum(1 for n in self.earlier if self.view.compartment_of.get(n) == scope)

    def _step(self, scope: ScopeState, step: Step, members: list[str]) -> tuple[ScopeState, bool]:
        if isinstance(step, CanaryStep):
            return self._canary(scope, step, members)
        if isinstance(step, SoakStep):
            return scope, self._soak(scope, step, members)
        if isinstance(step, ApprovalStep):
            return scope, self._approval(scope, step)
        return self._batches(scope, step, members)

    # -- canary -------------------------------------------------------------------------------

    def _canary(self, scope: ScopeState, step: CanaryStep, members: list[str]) -> tuple[ScopeState, bool]:
        if scope.canary is None:
            scope = scope.model_copy(update={"canary": tuple(self._choose_canary(step, members))})
        canary = scope.canary or ()
        broken = [n for n in canary if n in self.failed]
        if broken:
            detail = "; ".join(
                f"{n}: {self.failed[n].message}" if self.failed[n].message else n for n in broken
            )
            self.halt_now(f"canary failed ({detail})", scope.name)
            return scope, False
        outstanding = [n for n in canary if n in self.view.nodes and self._unfinished(n)]
        for node in outstanding:
            if node not in self.pending:
                continue
            if len(self.starts) >= self.max_starts:
                self._capped()  # a canary wider than a decision starts over several
                break
            self._try_start(node, scope.name, 0)
        if outstanding:
            self.notes.append(f"{scope.name}: canary {len(canary) - len(outstanding)}/{len(canary)} done")
        return scope, not outstanding

    def _unfinished(self, node: str) -> bool:
        if node in self.updated or node in self.failed:
            return False
        return node in self.running or node in self.pending

    def _choose_canary(self, step: CanaryStep, members: list[str]) -> list[str]:
        candidates = [n for n in members if n in self.pending]
        if step.selector is not None:
            selector = step.selector
            return [n for n in candidates if selector.matches(self.view.nodes[n].labels)]
        # Prefer nodes that can start now, and cover the most common kinds of change first (one
        # node per kind, round-robin): a canary that only saw a config tweak proves nothing about
        # the driver upgrade most nodes will get. Deterministic: groups keep the rollout order.
        ready = [n for n in candidates if self.view.node_refusal(n) is None]
        rest = [n for n in candidates if self.view.node_refusal(n) is not None]
        ordering = self.view.prepared.ordering
        if ordering.idle or ordering.units:
            # With workloads known, a canary on an idle node interrupts no job, and one on a
            # single-node job's node interrupts no job twice (its other nodes would follow later).
            ready.sort(key=lambda n: 0 if n in ordering.idle else len(ordering.units.get(n, (n,))))
        groups: dict[tuple[str, ...], list[str]] = {}
        for node in ready + rest:
            groups.setdefault(_signature(self.view.work[node]), []).append(node)
        ranked = sorted(groups.values(), key=len, reverse=True)  # stable: ties keep first appearance
        picks: list[str] = []
        depth = 0
        while len(picks) < (step.count or 0) and any(depth < len(g) for g in ranked):
            picks.extend(g[depth] for g in ranked if depth < len(g))
            depth += 1
        return picks[: step.count]

    # -- soak and approval --------------------------------------------------------------------

    def _soak(self, scope: ScopeState, step: SoakStep, members: list[str]) -> bool:
        if step.health_gate is not None:
            watched = {
                n for n in self.updated if scope.name in (GATES_SCOPE, self.view.compartment_of.get(n))
            }
            problem = _health_problem(step.health_gate, watched, self.view)
            self.watch_fleet = True  # a node may turn unhealthy at any time during the soak
            if problem is not None:
                self.halt_now(f"soak {step.name}: {problem}", scope.name)
                return False
        entered = scope.entered_at or self.now
        end = entered + timedelta(seconds=step.duration_seconds)
        if self.now < end:
            self.waits.append(end)
            self.notes.append(f"{scope.name}: soak {step.name} until {end.isoformat()}")
            return False
        return True

    def _approval(self, scope: ScopeState, step: ApprovalStep) -> bool:
        approval_id = f"{scope.name}/{step.name}"
        if approval_id in self.observations.approvals:
            return True
        if step.timeout_seconds is not None:
            deadline = (scope.entered_at or self.now) + timedelta(seconds=step.timeout_seconds)
            if self.now >= deadline:
                self.halt_now(f"approval {approval_id} timed out", scope.name)
                return False
            self.waits.append(deadline)
        self.notes.append(f"awaiting approval {approval_id}")
        return False

    # -- batches ------------------------------------------------------------------------------

    def _batches(self, scope: ScopeState, step: BatchesStep, members: list[str]) -> tuple[ScopeState, bool]:
        while self.halt is None:
            if scope.open:
                scope = self._fill(scope, members)
                if any(n in self.running for n in scope.current):
                    self._note_batch(scope)
                    return scope, False
                if not scope.current:
                    if any(n in self.pending for n in members):
                        return scope, False  # every candidate is blocked; the reasons are recorded
                    scope = _close(scope, self.now)
                    continue
                scope = self._evaluate(scope, step, members)
                continue
            if not any(n in self.pending for n in members):
                finishing = self._finishing_in(scope.name)
                if finishing:
                    self.notes.append(f"{scope.name}: {finishing} node(s) finishing the previous change")
                return scope, self._running_in(scope.name) == 0 and not finishing
            if step.pause_seconds and scope.batch_closed_at is not None:
                resume = scope.batch_closed_at + timedelta(seconds=step.pause_seconds)
                if self.now < resume:
                    self.waits.append(resume)
                    self.notes.append(f"{scope.name}: pause between batches until {resume.isoformat()}")
                    return scope, False
            size = next_batch_size(step.strategy, scope.batch, self._total(scope, members))
            scope = scope.model_copy(update={"current_size": size, "current": ()})
        return scope, False

    def _fill(self, scope: ScopeState, members: list[str]) -> ScopeState:
        if self.view.prepared.ordering.units:
            return self._fill_units(scope, members)
        wanted = scope.current_size - len(scope.current)
        want = min(wanted, self.max_starts - len(self.starts))
        started: list[str] = []
        number = scope.batch.batches + 1
        for index, node in enumerate(members):
            if node not in self.pending:
                continue
            if len(started) >= want:
                if want < wanted:
                    self._capped()  # a pending member is left for the next decision
                break
            if self._try_start(node, scope.name, number):
                started.append(node)
            elif (refusal := self._budget_refusal(node)) is not None:
                # Rooms only shrink within a call and every member shares this compartment's room:
                # the rest can start only if it costs nothing (a node already unavailable).
                self.budget_waits.append((refusal, members, index + 1))
                started += self._start_free(members[index + 1 :], want - len(started), scope.name, number)
                break
        if not started:
            return scope
        return scope.model_copy(update={"current": scope.current + tuple(started)})

    def _fill_units(self, scope: ScopeState, members: list[str]) -> ScopeState:
        """``_fill`` when workloads are known: a unit (a workload's nodes, ``ordering``) starts
        whole or not at all. A unit that does not fit the batch's room waits for a later batch
        while smaller ones after it fill the room; an empty batch grows to hold a whole unit (units
        are never larger than the cap). A unit the budget cannot hold whole waits for room."""
        units, chains = self.view.prepared.ordering.units, self.view.prepared.ordering.chains
        room = scope.current_size - len(scope.current)
        started: list[str] = []
        number = scope.batch.batches + 1
        seen: set[str] = set()
        passed: set[str] = set()  # workloads cut into pieces whose piece was passed over
        for index, node in enumerate(members):
            if node in seen or node not in self.pending:
                continue
            unit = [n for n in units.get(node, (node,)) if n in self.pending]
            seen.update(unit)
            chain = chains.get(node)
            if chain in passed or (len(unit) > room - len(started) and (scope.current or started)):
                if chain is not None:
                    passed.add(chain)
                continue
            if len(self.starts) + len(unit) > self.max_starts and self.starts:
                self._capped()
                break
            taken, full = self._start_unit(unit, scope.name, number, grows=len(unit) > room)
            started += taken
            if not taken and chain is not None:
                passed.add(chain)
            if full is not None:
                # As in ``_fill``: the cap is full, only free starts remain.
                self.budget_waits.append((full, members, index + 1))
                started += self._start_free(members[index + 1 :], room - len(started), scope.name, number)
                break
            if len(started) >= room:
                break
        if not started:
            return scope
        return scope.model_copy(update={"current": scope.current + tuple(started)})

    def _start_unit(
        self, unit: list[str], scope: str, batch: int, *, grows: bool
    ) -> tuple[list[str], Refusal | None]:
        """Start a unit's nodes; also the budget's refusal when a one-node unit found the cap full."""
        if len(unit) == 1:
            if self._try_start(unit[0], scope, batch):
                return unit, None
            return [], self._budget_refusal(unit[0])
        refusal = self._unit_refusal(unit)
        if refusal is not None:
            for member in unit:
                self._hold(member, refusal)
            return [], None
        if grows:
            self.notes.append(f"{scope}: batch {batch} grows to {len(unit)} nodes for one workload")
        return [n for n in unit if self._try_start(n, scope, batch)], None

    def _unit_refusal(self, unit: list[str]) -> Refusal | None:
        """Why the unit cannot start whole now: a node of it waits for its workloads, or the
        budget cannot take every node at once (None: it can)."""
        waiting = [r for r in map(self._workload_refusal, unit) if r is not None]
        if waiting:
            return waiting[0]
        tracker = self.tracker
        compartment = self.view.compartment_of[unit[0]]
        cost = sum(tracker.cost(n) for n in unit)
        mine = len(tracker.ours) + len(unit)
        mine_here = tracker.ours_used.get(compartment, 0) + len(unit)
        if (
            cost <= min(tracker.room(), tracker.compartment_room(compartment))
            and mine <= tracker.cap
            and mine_here <= tracker.compartment_caps.get(compartment, 0)
        ):
            return None
        holders = tracker.unavailable
        reason = (
            f"{BUDGET}: the {len(unit)} nodes of one workload start together; "
            f"{len(holders)} of maxUnavailable {tracker.cap} in use"
        )
        return Refusal(reason, waiting=bool(tracker.ours), outside=bool(holders - tracker.reporting))

    def _capped(self) -> None:
        """A batch wider than the room left in this decision fills on the next one, a second
        later: a decision with hundreds of starts is a payload of hundreds of KB (the SDK warns at
        512 KiB and fails at 2 MiB), and as many child workflow starts in one workflow task."""
        if self.now + CAPPED_RETRY not in self.waits:
            self.waits.append(self.now + CAPPED_RETRY)
            self.notes.append(f"more starts next decision (at most {self.max_starts} per decision)")

    def _start_free(self, members: list[str], want: int, scope: str, batch: int) -> list[str]:
        free = self.pending & self.tracker.unavailable
        started: list[str] = []
        for node in members:
            if len(started) >= want:
                break
            if node in free and self._try_start(node, scope, batch):
                started.append(node)
        return started

    def _evaluate(self, scope: ScopeState, step: BatchesStep, members: list[str]) -> ScopeState:
        size = len(scope.current)
        batch = evaluate_batch(
            step.strategy,
            scope.batch,
            size=size,
            succeeded=scope.current_succeeded,
            total=self._total(scope, members),
        )
        scope = _close(scope.model_copy(update={"batch": batch}), self.now)
        if batch.should_stop:
            self.halt_now(
                f"compartment {scope.name}: {batch.consecutive_failures} consecutive failed batches "
                f"(failureThreshold {step.strategy.failure_threshold})",
                scope.name,
            )
        return scope

    def _total(self, scope: ScopeState, members: list[str]) -> int:
        active = sum(1 for n in members if n in self.pending) + self._running_in(scope.name)
        return scope.batch.processed + active

    def _note_batch(self, scope: ScopeState) -> None:
        active = sum(1 for n in scope.current if n in self.running)
        self.notes.append(
            f"{scope.name}: batch {scope.batch.batches + 1} ({len(scope.current)}/{scope.current_size} "
            f"started, {active} running)"
        )

    # -- starting a node ----------------------------------------------------------------------

    def _try_start(self, node: str, scope: str, batch: int) -> bool:
        refusal = self._refusal(node)
        if refusal is not None:
            self._hold(node, refusal)
            return False
        self.tracker.take(node)
        self.pending.discard(node)
        self.running.add(node)
        self.blocked.pop(node, None)
        self.waiting.pop(node, None)
        self.starts.append(
            NodeStart(
                node=node,
                scope=scope,
                compartment=self.view.compartment_of[node],
                batch=batch,
                work=self.view.work[node],
                expected_seconds=self.view.expected_seconds(node),
            )
        )
        return True

    def _refusal(self, node: str) -> Refusal | None:
        """Why ``node`` cannot start now: the node itself, the budget, then the windows."""
        reason = self.view.node_refusal(node)
        if reason is not None:
            return Refusal(reason, waiting=False)
        return self._workload_refusal(node) or self.tracker.refusal(node) or self._window_refusal(node)

    def _workload_refusal(self, node: str) -> Refusal | None:
        """The policy's ``workloadWait``: hold a node while the pods it waits for run there, up to
        its bound from when the node was first held (a durable timer: the decision wakes then).
        A held node holds no budget; a finished pod shows on a fresh observation."""
        wait = self.policy.workload_wait
        pods = self.view.nodes[node].finishing
        if wait is None or not pods:
            return None
        since = self.held_since.setdefault(node, self.now)
        until = since + timedelta(seconds=wait.timeout_seconds)
        if self.now >= until:
            return None
        self.waits.append(until)
        more = f" and {len(pods) - 2} more" if len(pods) > 2 else ""
        return Refusal(
            f"WaitingForWorkloads: {', '.join(pods[:2])}{more} running; at most until {until.isoformat()}",
            waiting=True,
            outside=True,
        )

    def _budget_refusal(self, node: str) -> Refusal | None:
        """The refusal just recorded for ``node`` when it was the budget's."""
        waiting = node in self.waiting
        reason = self.waiting.get(node) or self.blocked.get(node, "")
        return Refusal(reason, waiting) if reason.startswith(BUDGET) else None

    def _hold(self, node: str, refusal: Refusal) -> None:
        held, other = (self.waiting, self.blocked) if refusal.waiting else (self.blocked, self.waiting)
        held[node] = refusal.reason
        other.pop(node, None)
        self.watch_fleet = self.watch_fleet or refusal.outside
        if refusal.held_by_failed is not None:
            self.held_by_failed.setdefault(refusal.held_by_failed, refusal.reason)

    def _window_refusal(self, node: str) -> Refusal | None:
        if self.window_left is None:
            return None
        seconds = self.view.expected_seconds(node)
        if self.window_left >= timedelta(seconds=seconds):
            return None
        if seconds not in self._fit_cache:
            self._fit_cache[seconds] = next_fit(self.policy.windows, self.now, seconds)
        opens = self._fit_cache[seconds]
        if opens is None:
            return Refusal(f"NeverFits: needs {_minutes(seconds)}, longer than every window", waiting=False)
        self.waits.append(opens)
        left = _minutes(int(self.window_left.total_seconds()))
        reason = (
            f"OutsideWindow: needs {_minutes(seconds)}, {left} left in the open window; "
            f"next fit {opens.isoformat()}"
        )
        return Refusal(reason, waiting=True)

    # -- the decision -------------------------------------------------------------------------

    def conclude(self, state: RolloutState) -> Decision:
        self._materialize_blocked()
        if state.halt is not None:
            return self.decision(state, Phase.HALTED, _halted(state))
        done = state.gates.step >= len(self.policy.gate_steps()) and all(
            s.step >= len(self.policy.compartment_steps(s.name)) for s in state.compartments
        )
        of = state.spec.rollback
        if done and not state.running and not state.running_for_earlier_target:
            # The same count as every status shows: targeted nodes that carry the target.
            carrying = len(self.view.nodes) - len(self.view.prepared.needing)
            message = f"{carrying}/{len(self.view.nodes)} nodes updated"
            if of is not None:
                message = f"{len(state.updated)} node(s) returned ({of.reason})"
            if state.failed or self.blocked:
                message += f", {len(state.failed)} failed, {len(self.blocked)} left out (see blocked)"
            return self.decision(state, Phase.ROLLED_BACK if of is not None else Phase.COMPLETE, message)
        if self.starts or state.running:
            phase = Phase.PROGRESSING
        elif self.waits or self.waiting:
            phase = Phase.WAITING
        else:
            phase = Phase.BLOCKED
        said = self.notes or [self._held_message()]
        message = "; ".join(said + self._split_notes())
        if of is not None:
            # Whatever holds a rollback, it is rolling back: the message says what holds it.
            return self.decision(state, Phase.ROLLING_BACK, f"{message} — because {of.reason}")
        return self.decision(state, phase, message)

    def _split_notes(self) -> list[str]:
        """Says that workloads larger than the cap go in consecutive batches (the first; a count)."""
        notes = self.view.prepared.ordering.notes
        if len(notes) > 1:
            return [f"{notes[0]} (and {len(notes) - 1} more such workloads)"]
        return list(notes)

    def _held_message(self) -> str:
        """What holds the rollout when no step has a note: the first held node (rollout order)
        and its reason, blocked ones first (they need someone to act)."""
        for what, held in (("blocked", self.blocked), ("waiting", self.waiting)):
            if held:
                node = min(held, key=lambda n: self.view.rank.get(n, 0))
                return f"{len(held)} node(s) {what}, first {node}: {held[node]}"
        return "nothing can start now"

    def _materialize_blocked(self) -> None:
        for refusal, members, start in self.budget_waits:
            held = self.waiting if refusal.waiting else self.blocked
            for node in members[start:]:
                if node in self.pending and node not in self.blocked and node not in self.waiting:
                    held[node] = refusal.reason
        self.budget_waits = []
        for node, failure in self.view.prepared.failed_earlier.items():
            if node not in self.blocked and node not in self.failed and node in self.view.nodes:
                self.blocked[node] = f"FailedEarlier: {failure} (reset the node to retry)"
        for node, problem in self.view.prepared.not_returned.items():
            if node not in self.blocked and node not in self.failed and node in self.view.nodes:
                self.blocked[node] = problem
        for node, problem in self.view.prepared.unreadable.items():
            if node not in self.blocked and node not in self.failed and node in self.view.nodes:
                self.blocked[node] = f"UnreadableState: {problem} (repair or reset the node's record)"

    def decision(self, state: RolloutState, phase: Phase, message: str) -> Decision:
        self._materialize_blocked()
        rank = self.view.rank

        def listed(held: dict[str, str]) -> tuple[BlockedNode, ...]:
            first = heapq.nsmallest(MAX_BLOCKED_LISTED, held.items(), key=lambda item: rank.get(item[0], 0))
            return tuple(BlockedNode(node=n, reason=r) for n, r in first)

        reasons: dict[str, int] = {}
        for reason in self.blocked.values():
            kind = reason.split(":", 1)[0]
            reasons[kind] = reasons.get(kind, 0) + 1
        future = [w for w in self.waits if w > self.now]
        ended = (Phase.HALTED, Phase.COMPLETE, Phase.ROLLED_BACK)
        wake = min(future) if future and phase not in ended else None
        return Decision(
            state=state,
            start=tuple(self.starts) if phase is not Phase.HALTED else (),
            phase=phase,
            message=message,
            wake_at=wake,
            blocked=listed(self.blocked),
            blocked_reasons=reasons,
            waiting=listed(self.waiting),
            watch_fleet=self.watch_fleet or bool(self.blocked),
            counts=self._counts(state, len(self.blocked)),
        )

    def _counts(self, state: RolloutState, blocked: int) -> Counts:
        needs = len(self.view.prepared.needing)
        return Counts(
            targeted=len(self.view.nodes),
            needs_work=needs,
            running=len(state.running),
            updated=len(state.updated),
            failed=len(state.failed),
            pending=len(self.pending),
            blocked=blocked,
            waiting=len(self.waiting),
            unavailable=len(self.tracker.unavailable),
            max_unavailable=self.view.cap,
        )


def _close(scope: ScopeState, now: datetime) -> ScopeState:
    return scope.model_copy(
        update={
            "current": (),
            "current_size": 0,
            "current_succeeded": 0,
            "current_failed": 0,
            "batch_closed_at": now,
        }
    )


def _exceeded(failure: FailurePolicy, failed: int) -> bool:
    return failure.max_failed_nodes is not None and failed > failure.max_failed_nodes


def _left_failed(view: FleetView, failed: Iterable[str], busy: set[str]) -> set[str]:
    """Of ``failed`` (nodes whose change toward this target failed), those unavailable only because
    this profile left them cordoned: no node workflow runs there, nobody else holds them."""
    out: set[str] = set()
    for node in failed:
        obs = view.nodes.get(node)
        left = obs is not None and obs.own_cordon and not obs.unschedulable and not obs.disruptions
        if left and node not in busy:
            out.add(node)
    return out


def _health_problem(gate: HealthGate, nodes: Iterable[str], view: FleetView) -> str | None:
    for node in sorted(nodes):
        obs = view.nodes.get(node)
        if obs is None:
            continue
        if gate.node_ready and not obs.ready:
            return f"updated node {node} is not Ready"
        for condition, wanted in sorted(gate.conditions.items()):
            actual = obs.conditions.get(condition, "Unknown")
            if actual != wanted:
                return f"updated node {node} has {condition}={actual}, wanted {wanted}"
    return None


def _signature(work: NodeWork) -> tuple[str, ...]:
    return (*(f"{p.package}:{p.action.value}" for p in work.packages), work.interrupt.kind.value)


def _minutes(seconds: int) -> str:
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds % 60 else f"{seconds // 60}m"
