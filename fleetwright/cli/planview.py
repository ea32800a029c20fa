"""What ``fleetwright plan`` prints for a ``Plan`` as tables: the outcome and ETA, the gates, the
images, the batches, each node's stages and the blocked nodes. A pure function of the plan; the
command (``fleetwright.cli.plan``) reads the inputs and imports this only to print a table.
"""

from __future__ import annotations

from datetime import datetime

from rich.console import Console
from rich.table import Table

from fleetwright.planner.rollout.preview import Plan


def _offset(plan: Plan, when: datetime) -> str:
    minutes = int((when - plan.generated_at).total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    return (f"{days}d" if days else "") + f"+{rest // 60:02d}:{rest % 60:02d}"


def _names(nodes: tuple[str, ...], limit: int = 4) -> str:
    shown = ", ".join(nodes[:limit])
    return shown + (f" … (+{len(nodes) - limit})" if len(nodes) > limit else "")


def render(plan: Plan, console: Console, max_nodes: int) -> None:
    eta = f"{plan.eta.isoformat()} ({_offset(plan, plan.eta)})" if plan.eta else "none (no node can start)"
    if plan.eta and plan.blocked:
        eta += f"; {len(plan.blocked)} blocked node(s) not included"
    if plan.rollback_of is not None:
        console.print(
            f"[bold]Rollback plan for NodeProfile {plan.profile}[/] (returns what the rollout of target "
            f"{plan.rollback_of} changed)",
            highlight=False,
        )
    else:
        console.print(f"[bold]Plan for NodeProfile {plan.profile}[/] (target {plan.target})", highlight=False)
    console.print(
        f"{plan.targeted} targeted nodes, {plan.needs_work} need work, {plan.drains} need a drain, "
        f"{plan.reboots} a reboot; maxUnavailable {plan.max_unavailable}; {len(plan.batches)} batches",
        highlight=False,
    )
    console.print(f"Outcome: {plan.phase.value} — {plan.message}", highlight=False)
    console.print(f"ETA: {eta}", highlight=False)
    for deadlock in plan.deadlocks:
        console.print(f"[yellow]Deadlock if nodes fail:[/] {deadlock}", highlight=False)
    if plan.workloads:
        interrupted = len({w for b in plan.batches for w in b.workloads})
        console.print(
            f"Workloads: {interrupted} of {plan.workloads} interrupted; expected GPU-hours lost "
            f"{plan.gpu_hours_lost:g} (each workload's GPUs x its batch's time from drain to done; "
            "the restart itself not included)",
            highlight=False,
        )
        for note in plan.notes:
            console.print(f"Note: {note}", highlight=False)
    if plan.preflight:
        console.print(
            f"Preflight: runs on {plan.preflight} node(s) in service before any cordon; a node whose "
            "checks pass is recorded at the target and never cordoned (known only when it runs; the "
            "batches above assume none passes)",
            highlight=False,
        )
    if plan.node_gate:
        console.print(
            "Node gate (each node stays cordoned after its stages until these pass; in each node's "
            "time): " + "; ".join(plan.node_gate),
            highlight=False,
        )
    if plan.fleet_gate:
        console.print(
            "Fleet gate (over the nodes updated so far; a check not passing stops new batches): "
            + "; ".join(plan.fleet_gate),
            highlight=False,
        )
    _images_lines(plan, console)
    _batch_table(plan, console)
    _node_table(plan, console, max_nodes)
    _blocked_table(plan, console)
    notes = [*plan.assumptions, f"finishes rounded up to {plan.resolution_seconds // 60} min"]
    if plan.approvals:
        notes.append("approval gates on the way: " + ", ".join(plan.approvals))
    console.print("[dim]Assumes: " + "; ".join(notes) + "[/]", highlight=False)


def _batch_table(plan: Plan, console: Console) -> None:
    table = Table(title="Batches", title_justify="left")
    columns = ["start", "end", "scope", "compartment", "batch", "nodes", "first nodes"]
    if plan.workloads:
        columns += ["interrupts", "GPU-h"]
    for column in columns:
        table.add_column(column, no_wrap=column not in ("first nodes", "interrupts"))
    for batch in plan.batches:
        row = [
            _offset(plan, batch.start),
            _offset(plan, batch.end),
            batch.scope,
            batch.compartment,
            "canary" if batch.number == 0 else str(batch.number),
            str(len(batch.nodes)),
            _names(batch.nodes),
        ]
        if plan.workloads:
            row += [
                _names(batch.workloads, 3) if batch.workloads else "none (idle nodes)",
                f"{batch.gpu_hours:g}",
            ]
        table.add_row(*row)
    console.print(table)


def _node_table(plan: Plan, console: Console, max_nodes: int) -> None:
    table = Table(title="Nodes (in start order)", title_justify="left")
    for column in ("node", "compartment", "batch", "start", "takes", "drain", "interrupt", "stages"):
        table.add_column(column, no_wrap=column != "stages")
    for node in plan.nodes[:max_nodes]:
        table.add_row(
            node.node,
            node.compartment,
            "canary" if node.batch == 0 else str(node.batch),
            _offset(plan, node.start),
            f"{node.expected_seconds // 60}m",
            "yes" if node.drain else "no",
            node.interrupt,
            " → ".join(node.steps),
        )
    console.print(table)
    if len(plan.nodes) > max_nodes:
        console.print(f"… {len(plan.nodes) - max_nodes} more nodes (--max-nodes, or -o json for all)")


def _blocked_table(plan: Plan, console: Console) -> None:
    if not plan.blocked:
        return
    table = Table(title="Blocked nodes", title_justify="left")
    table.add_column("node", no_wrap=True)
    table.add_column("reason")
    for item in plan.blocked:
        table.add_row(item.node, item.reason)
    console.print(table)


def _images_lines(plan: Plan, console: Console) -> None:
    for reference, pinned in sorted(plan.images.items()):
        digest = pinned.partition("@")[2] if not pinned.startswith("unresolved: ") else pinned
        console.print(f"Image {reference} → {digest}", highlight=False)
