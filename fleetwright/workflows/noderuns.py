"""The node workflows a rollout runs: started by one activity per decision (``activities.starts``:
no history events per node here), each with its input, summary, details and search attributes;
signalled to abort; and looked up when they may have ended without reporting (terminated, timed
out, or their report lost), so the rollout never waits for them forever."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from fleetwright.workflows.pinning import pinned_packages, pinned_settings
from fleetwright.workflows.rolloutrun import RolloutRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.payloads import EndedNodesRequest, StartNodesRequest, WorkflowStart
    from fleetwright.activities.starts import NodeStarter
    from fleetwright.api.health import ResolvedGate
    from fleetwright.api.nodeprofile import Package
    from fleetwright.planner.node.preflight import runs_preflight
    from fleetwright.planner.rollout.state import NodeStart
    from fleetwright.workflows import retry
    from fleetwright.workflows.ids import node_workflow_id
    from fleetwright.workflows.node import NODE_WORKFLOW
    from fleetwright.workflows.payloads import DecideReport, NodeInput
    from fleetwright.workflows.progress import node_details, node_search_attributes, node_summary

# A decision starts at most 200 nodes (planner.rollout.working.MAX_STARTS_PER_DECISION), a few a second on
# a loaded dev server: the bound is for a worker lost mid-start, whose retry skips what it began.
START_NODES_TIMEOUT = timedelta(minutes=10)


async def start_nodes(run: RolloutRun, starts: tuple[NodeStart, ...], report: DecideReport) -> None:
    if not starts:
        return
    assert run.state is not None
    spec = run.state.spec
    # One activity starts the decision's node workflows: no history events or workflow tasks per
    # node here.
    request = StartNodesRequest(
        workflow=NODE_WORKFLOW,
        task_queue=workflow.info().task_queue,
        decided_at=workflow.now(),
        starts=tuple(_node_start(run, _node_input(run, start, report, starts)) for start in starts),
    )
    await workflow.execute_activity_method(
        NodeStarter.start_nodes,
        request,
        start_to_close_timeout=START_NODES_TIMEOUT,
        heartbeat_timeout=retry.heartbeat(run.settings),
        retry_policy=retry.API_CALL,
        summary=f"start {len(starts)} node workflow(s) of {spec.profile}",
    )


def _node_start(run: RolloutRun, node: NodeInput) -> WorkflowStart:
    return WorkflowStart(
        id=node_workflow_id(node.profile, node.node),
        input=node.model_dump(mode="json"),
        summary=node_summary(node),
        details=node_details(node, run.policy.metadata.name),
        search_attributes=node_search_attributes(node),
    )


def _node_input(
    run: RolloutRun, start: NodeStart, report: DecideReport, batch: tuple[NodeStart, ...] = ()
) -> NodeInput:
    assert run.state is not None
    spec = run.state.spec
    meta = run.profile.metadata
    # Only a policy with a node gate fills these (a payload field no 0.1.0 input carries). A
    # rollback returns to a known state: like the canary and soak steps, the gate does not run,
    # except on a node whose gate failed: its health was shown bad, so it is shown good again.
    gated = start.work.returns_to is None or start.regate
    resolved = run.policy.spec.resolved_gate() if gated else ResolvedGate()
    gate, external, validations = resolved.checks, resolved.external, resolved.validations
    return NodeInput(
        profile=spec.profile,
        profile_uid=meta.uid or "",
        generation=meta.generation or 0,
        target=spec.target,
        since=run.state.rollout_since,
        node=start.node,
        parent_workflow_id=workflow.info().workflow_id,
        work=start.work,
        records=report.records.get(start.node, {}),
        # A rollback's node returns each package to its own earlier definition.
        desired=start.work.returns_to if start.work.returns_to is not None else spec.packages,
        packages=pinned_packages(run, _stage_packages(run, start)),
        drain=run.profile.spec.drain,
        protected_pods=run.profile.spec.pod_non_interrupt_labels,
        tolerations=tuple(run.profile.spec.additional_tolerations),
        node_order=report.node_order.get(start.node, 0),
        attempt=run.controls.attempts.get(start.node, 0),
        runtime_required=run.profile.spec.runtime_required,
        settings=pinned_settings(run),
        unregistered_search_attributes=run.unregistered,
        gate=gate,
        batch=tuple(s.node for s in batch) if gate else (),
        external=external,
        validations=validations,
        regate=start.regate and bool(gate or external or validations),
        preflight=runs_preflight(start.work, enabled=bool(run.policy.spec.preflight), regate=start.regate),
    )


def _stage_packages(run: RolloutRun, start: NodeStart) -> tuple[Package, ...]:
    """The package definitions the node's stage Jobs run: the profile's, or for a rollback
    each package's definition in what it returns to (the replaced profile's; an uninstall
    removes what the rolled-back profile installed)."""
    current = tuple(run.profile.spec.packages)
    returns = start.work.returns_to
    if returns is None:
        return current
    replaced = {p.name: p for p in run.previous.spec.packages} if run.previous else {}
    mine = {p.name: p for p in current}
    return tuple(mine[p.name] if p.uninstall else replaced[p.name] for p in returns)


async def abort_children(run: RolloutRun) -> None:
    """Signal ``abort`` to every running node workflow not signalled yet."""
    assert run.state is not None
    for node in run.state.running:
        if node.node in run.abort_sent:
            continue
        run.abort_sent.add(node.node)
        handle = workflow.get_external_workflow_handle(node_workflow_id(run.state.spec.profile, node.node))
        try:
            await handle.signal("abort")
        except ApplicationError:
            # It finished in the meantime; its report is on the way.
            workflow.logger.info("node %s finished before the abort reached it", node.node)


async def collect_ended(run: RolloutRun) -> bool:
    """Node workflows that ended without reporting (terminated or timed out in Temporal, or
    whose report was lost) are looked up once per ``ended_check_seconds`` while nodes run (its
    own, and those still running for an earlier target), and their results folded in as
    reports: the rollout never waits for them forever, and a node whose workflow did not finish
    is shown failed, which drops its start claim. True when it found one."""
    assert run.state is not None
    assert run.ended_checked_at is not None
    now = workflow.now()
    if now - run.ended_checked_at < ended_check(run):
        return False
    run.ended_checked_at = now
    reported = {r.node for r in run.results}
    profile = run.state.spec.profile
    waiting = {node.node: node.started_at for node in run.state.running if node.node not in reported}
    earlier = tuple(n for n in run.state.running_for_earlier_target if n not in reported)
    if not waiting and not earlier:
        return False
    request = EndedNodesRequest(
        id_prefix=node_workflow_id(profile, ""),
        waiting=waiting,
        target=run.state.spec.target,
        earlier=earlier,
    )
    ended = await workflow.execute_activity_method(
        NodeStarter.ended_nodes,
        request,
        start_to_close_timeout=START_NODES_TIMEOUT,
        heartbeat_timeout=retry.heartbeat(run.settings),
        retry_policy=retry.API_CALL,
        summary=f"look for ended node workflows among the {len(waiting)} running of {profile}",
    )
    reported = {r.node for r in run.results}  # reports that arrived meanwhile win
    run.results.extend(r for r in ended.finished + ended.unfinished if r.node not in reported)
    run.ended.extend(r for r in ended.unfinished if r.node not in reported)
    return bool(ended.finished or ended.unfinished)


def ended_check(run: RolloutRun) -> timedelta:
    return timedelta(seconds=run.settings.ended_check_seconds)
