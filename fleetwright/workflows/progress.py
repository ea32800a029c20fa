"""What a rollout shows while it runs: its ``Progress`` (the workflow's query and memo, which the
controller mirrors into the NodeProfile status and the CLI reads), the search attributes that make
it findable, and what the Temporal UI shows of the rollout and node workflows: the summary and
details they are started with, and the rollout's current details (a Markdown table).

Pure: built from a decision, the controls and the running nodes' held waits, or from a workflow's
input; the workflows and their starters publish what it returns. It must not decide anything (the
planner did).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from temporalio.common import SearchAttributeUpdate

from fleetwright.activities.payloads import NodePhase
from fleetwright.api.deploymentpolicy import DeploymentPolicy
from fleetwright.planner.node.packages import DesiredPackage
from fleetwright.planner.policy.model import GATES_SCOPE
from fleetwright.planner.rollout.state import BlockedNode, Decision, Phase, RolloutState
from fleetwright.workflows import search as sa
from fleetwright.workflows.node import NODE_WORKFLOW
from fleetwright.workflows.payloads import Controls, NodeInput, Progress, RolloutInput

MAX_BLOCKED = 20
"""Blocked, waiting and failed nodes named in the progress (with their reasons)."""
MAX_RUNNING_SHOWN = 20
MAX_LISTED = 10
"""Failed and blocked nodes listed in the current details."""
NODE_COLUMNS = ("targeted", "updated", "running", "waiting", "blocked", "failed", "maxUnavailable")
"""The node counts of the current details' table, in order."""


def rollout_progress(
    decision: Decision,
    *,
    controls: Controls,
    held: tuple[BlockedNode, ...],
    generation: int,
    phase: str | None = None,
    unregistered_search_attributes: tuple[str, ...] = (),
) -> Progress:
    """The progress of ``decision``; ``held``: running nodes waiting on something a human may
    have to clear; ``phase``: the rollout's end (Aborted, Deleted), when it ended;
    ``unregistered_search_attributes``: those the namespace lacks (not published)."""
    decision = _aborting(decision, controls, phase)
    state = decision.state
    # Running nodes held in a wait (a PDB-blocked drain, ...) are blocked too, and listed first:
    # they are the ones a human can unblock.
    running = {r.node for r in state.running}
    held = tuple(b for b in held if b.node in running)
    blocked = (held + tuple(b for b in decision.blocked if b.node not in running))[:MAX_BLOCKED]
    failed = state.failed[:MAX_BLOCKED]
    counts = decision.counts
    return Progress(
        profile=state.spec.profile,
        phase=phase or _phase(decision, controls),
        message=decision.message,
        step=current_step(state),
        targeted=counts.targeted,
        # Nodes that carry the target, whichever pass updated them (a joined node starts a new
        # pass), except those still at their node gate or that failed it.
        updated=counts.targeted - counts.needs_work - counts.unproven,
        running=counts.running,
        failed=counts.failed,
        blocked=counts.blocked + len(held),
        waiting=counts.waiting,
        max_unavailable=counts.max_unavailable,
        spared=counts.spared,
        running_nodes=tuple(r.node for r in state.running),
        failed_nodes=tuple(f.node for f in state.failed),
        failed_reasons={f.node: f.message for f in failed if f.message},
        blocked_nodes=tuple(b.node for b in blocked),
        blocked_reasons={b.node: b.reason for b in blocked},
        waiting_reasons={w.node: w.reason for w in decision.waiting[:MAX_BLOCKED]},
        paused=controls.paused,
        generation=generation,
        target=state.spec.target,
        deleting=controls.deleting,
        rolled_back_generation=generation if state.spec.rollback is not None else None,
        rolled_back=state.spec.rollback,
        unregistered_search_attributes=unregistered_search_attributes,
    )


def _aborting(decision: Decision, controls: Controls, phase: str | None) -> Decision:
    """The planner decides an aborted rollout like a paused one (nothing starts), but it is not
    paused: its running nodes finish their current stage, then it ends Aborted."""
    if not controls.aborted or phase is not None or decision.phase is not Phase.PAUSED:
        return decision
    waiting = f"aborting: waiting for {len(decision.state.running)} running node(s)"
    return decision.model_copy(update={"phase": Phase.PROGRESSING, "message": waiting})


def _phase(decision: Decision, controls: Controls) -> str:
    if controls.paused and decision.phase is not Phase.HALTED:
        return Phase.PAUSED.value
    return decision.phase.value


def current_step(state: RolloutState) -> str:
    """The policy step the rollout is at: a rollout-wide gate, else each compartment's step."""
    policy = state.spec.policy
    gates = policy.gate_steps()
    if state.gates.step < len(gates):
        return f"{GATES_SCOPE}: {gates[state.gates.step].name}"
    parts = []
    for scope in state.compartments:
        steps = policy.compartment_steps(scope.name)
        if scope.step < len(steps):
            parts.append(f"{scope.name}: {steps[scope.step].name} (batch {scope.batch.batches + 1})")
    return "; ".join(parts) or "done"


class Versioned(Protocol):
    """A package as a profile names it (the resource's or the planner's)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...


def package_refs(packages: Iterable[Versioned]) -> list[str]:
    """``name@version`` of each package: how the search attribute and the UI name them."""
    return [f"{p.name}@{p.version}" for p in packages]


def search_attributes(
    progress: Progress, packages: Iterable[DesiredPackage]
) -> list[SearchAttributeUpdate[Any]]:
    return [
        sa.PROFILE.value_set(progress.profile),
        sa.PHASE.value_set(progress.phase),
        sa.PACKAGES.value_set(package_refs(packages)),
        sa.NODES_DONE.value_set(progress.updated),
        sa.NODES_FAILED.value_set(progress.failed),
        sa.NODES_BLOCKED.value_set(progress.blocked),
    ]


# The UI renders Markdown tables with no cell padding: an em space on each side of a cell keeps
# the columns apart (the renderer trims only ASCII spaces).
_PAD = "\u2003"


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], numeric: bool = False
) -> list[str]:
    """A Markdown table whose columns stay apart in the Temporal UI; ``numeric``: right-aligned."""

    def row(cells: Iterable[object]) -> str:
        return "|" + "|".join(f" {_PAD}{cell}{_PAD} " for cell in cells) + "|"

    rule = "|" + "|".join("--:" if numeric else "---" for _ in header) + "|"
    return [row(header), rule, *map(row, rows)]


def _codes(values: Iterable[str]) -> str:
    return ", ".join(f"`{v}`" for v in values) or "none"


def node_query(profile: str) -> str:
    """The Temporal visibility query that lists a profile's node workflows (they are not children
    of the rollout: an activity starts them)."""
    return f'WorkflowType="{NODE_WORKFLOW}" AND {sa.PROFILE.name}="{profile}"'


def _policy_text(policy: DeploymentPolicy) -> str:
    named = (s.kind if s.name in (None, s.kind) else f"{s.name} ({s.kind})" for s in policy.spec.steps)
    steps = " → ".join(named) or "batches"
    return f"`{policy.metadata.name}`: maxUnavailable {policy.spec.max_unavailable}; {steps}"


def rollout_summary(rollout: RolloutInput) -> str:
    """The rollout workflow's one-line summary in the UI, as started."""
    profile = rollout.profile
    packages = ", ".join(package_refs(profile.spec.packages)) or "no packages"
    return f"NodeProfile {profile.metadata.name}: {packages} (policy {rollout.policy.metadata.name})"


def rollout_details(rollout: RolloutInput) -> str:
    """The rollout workflow's details in the UI: what it was started with. A later change of the
    profile or the policy arrives as a signal, so the current details show the current target."""
    meta = rollout.profile.metadata
    return "\n".join(
        [
            f"**NodeProfile** `{meta.name}` (generation {meta.generation or 0})",
            f"**Packages** {_codes(package_refs(rollout.profile.spec.packages))}",
            f"**Policy** {_policy_text(rollout.policy)}",
            f"**Node workflows** `{node_query(meta.name)}`",
            "",
            "As started; the current details show the rollout's current target.",
        ]
    )


def node_summary(node: NodeInput) -> str:
    """A node workflow's one-line summary in the UI: the node, the packages, the stages it runs."""
    stages = ", ".join(s.stage.value for s in node.work.steps) or "no stages"
    return f"{node.node}: {', '.join(package_refs(node.desired)) or 'no packages'} ({stages})"


def node_search_attributes(node: NodeInput) -> dict[str, str | list[str]]:
    """The search attributes a node workflow starts with (name -> keyword or keyword list), those
    the namespace lacks left out: set by its starter, not upserted by the workflow (an event and a
    visibility write less per node)."""
    if not node.settings.search_attributes:
        return {}
    values: dict[str, str | list[str]] = {
        sa.PROFILE.name: node.profile,
        sa.NODE.name: node.node,
        sa.PHASE.name: NodePhase.IN_PROGRESS.value,
        sa.PACKAGES.name: [f"{p.name}@{p.version}" for p in node.packages],
    }
    return {name: value for name, value in values.items() if name not in node.unregistered_search_attributes}


def node_details(node: NodeInput, policy: str) -> str:
    """A node workflow's details in the UI: its node, profile, packages, stages and policy."""
    return "\n".join(
        [
            f"**Node** `{node.node}`",
            f"**NodeProfile** `{node.profile}` (generation {node.generation})",
            f"**Packages** {_codes(package_refs(node.desired))}",
            f"**Stages** {', '.join(s.stage.value for s in node.work.steps) or 'none'}",
            f"**Policy** `{policy}`",
            f"**Rollout** `{node.parent_workflow_id}`",
        ]
    )


def current_details(progress: Progress, decision: Decision) -> str:
    """The Temporal UI's current details: where the rollout is, and a table of its nodes."""
    counts = (
        progress.targeted,
        progress.updated,
        progress.running,
        progress.waiting,
        progress.blocked,
        progress.failed,
        progress.max_unavailable,
    )
    rows = [
        f"**{progress.profile}** — {progress.phase}: {progress.message}",
        "",
        f"**Step** {progress.step}",
        f"**Packages** {_codes(package_refs(decision.state.spec.packages))}",
        "",
        *markdown_table(NODE_COLUMNS, [counts], numeric=True),
        "",
        f"**Node workflows** `{node_query(progress.profile)}`",
    ]
    if progress.rolled_back_generation is not None:
        rows += [
            "",
            f"Rollback of generation {progress.rolled_back_generation}: the nodes it changed return to "
            "what they carried before; a spec with other packages starts a new rollout.",
        ]
    if progress.running_nodes:
        rows += ["", "**Running** " + ", ".join(progress.running_nodes[:MAX_RUNNING_SHOWN])]
    if decision.state.failed:
        rows += ["", "**Failed**"] + [f"- {f.node}: {f.message}" for f in decision.state.failed[:MAX_LISTED]]
    if progress.blocked_nodes:
        rows += ["", "**Blocked**"] + [
            f"- {n}: {progress.blocked_reasons.get(n, 'blocked')}"
            for n in progress.blocked_nodes[:MAX_LISTED]
        ]
    return "\n".join(rows)
