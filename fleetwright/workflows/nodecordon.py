"""The cordon and drain of a node workflow: the cordon before a disruption (then the wait for
protected pods and the drain), the cordon a node not cordoned yet takes for its node gate (never
drained), and the re-cordon, as ours, of a node whose other cordon was lifted between two stages.
Lifting the cordon is the workflow's end (``node``). Orchestration only: every side effect is an
activity, called through the ``NodeRun``.
"""

from __future__ import annotations

from temporalio import workflow

from fleetwright.workflows.noderun import NodeRun

with workflow.unsafe.imports_passed_through():
    from fleetwright.activities.node import NodeActivities
    from fleetwright.activities.payloads import (
        CordonRequest,
        DrainRequest,
        ProtectedPodsRequest,
        StatusNote,
    )


async def prepare_disruption(run: NodeRun, first: StatusNote | None) -> None:
    """Cordon (showing ``first`` before it), wait for protected pods, drain."""
    run.stage = "cordon"
    request = CordonRequest(profile=run.node_input.profile, node=run.node_input.node, show_before=first)
    run.cordon = await run.call(NodeActivities.cordon, request)
    await clear_workloads(run)


async def cordon_for_gate(run: NodeRun) -> None:
    """A node at its gate takes no new work: one not cordoned yet (its change needs no interrupt,
    no validation) is cordoned now, not drained (its pods keep running); the cordon is lifted only
    when the gate passes."""
    if run.cordon is not None:
        return
    # patch gate-cordon: since 0.2; deprecate_patch in 0.3, remove in 0.4
    if not workflow.patched("gate-cordon"):
        return
    run.stage = "cordon-for-gate"
    request = CordonRequest(profile=run.node_input.profile, node=run.node_input.node)
    run.cordon = await run.call(NodeActivities.cordon, request)


async def keep_cordoned(run: NodeRun) -> None:
    """Under someone else's cordon, before each further stage: if they lifted it meanwhile, the
    node is cordoned again, as ours (so we lift it when done), and drained again (pods may have
    landed on it since). A node this rollout disrupts stays cordoned until its workflow ends."""
    if run.cordon is None or run.cordon.ours:
        return
    run.stage = "re-cordon"
    request = CordonRequest(profile=run.node_input.profile, node=run.node_input.node)
    run.cordon = await run.call(NodeActivities.cordon, request)
    if run.cordon.ours:
        workflow.logger.info("%s: its other cordon was lifted mid-update; cordoned it", run.node_input.node)
        await clear_workloads(run)


async def clear_workloads(run: NodeRun) -> None:
    """Wait for protected pods, then drain."""
    node_input = run.node_input
    selector = node_input.protected_pods
    if selector is not None and (selector.match_labels or selector.match_expressions):
        run.stage = "wait-protected-pods"
        protected = ProtectedPodsRequest(
            profile=node_input.profile,
            node=node_input.node,
            rollout_workflow_id=node_input.parent_workflow_id,
            selector=selector,
            timeout_seconds=node_input.settings.protected_pods_timeout_seconds,
        )
        await run.wait(NodeActivities.wait_protected_pods, protected, protected.timeout_seconds)
    run.stage = "drain"
    drain = DrainRequest(
        profile=node_input.profile,
        node=node_input.node,
        rollout_workflow_id=node_input.parent_workflow_id,
        drain=node_input.drain,
        package_namespace=node_input.settings.package_namespace,
        poll_seconds=node_input.settings.drain_poll_seconds,
    )
    await run.wait(NodeActivities.drain, drain, node_input.drain.timeout_seconds or 7 * 24 * 3600)
