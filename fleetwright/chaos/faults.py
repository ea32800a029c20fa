"""Injecting one planned fault into the running stack: kill -9 and restart of a process, Temporal
frozen (unreachable), third-party edits to nodes (cordon, label, taint), a node deleted, a
malformed fleetwright annotation, a running node workflow terminated. Which node a node fault hits
is chosen from the latest snapshot.

Owns the mechanics of each fault and the outage windows it causes; it must not check anything.
The third party lifts its own cordon only after a hold (recorded, so the check knows), so a foreign
cordon that turns schedulable earlier can only be fleetwright's doing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fleetwright.api.keys import claim_key, state_key
from fleetwright.chaos.invariants import Outage, disrupted_by
from fleetwright.chaos.iteration import Fault, Injection
from fleetwright.chaos.snapshot import NodeView
from fleetwright.chaos.system import ChaosStack
from fleetwright.workflows.ids import node_workflow_id

PROCESS = {
    Fault.KILL_WORKER: "worker",
    Fault.KILL_CONTROLLER: "controller",
    Fault.KILL_TEMPORAL: "temporal",
    Fault.KILL_APISERVER: "kube-apiserver",
}
FOREIGN_PREFIX = "chaos.example.com"
MALFORMED_STATE = '{"v": 1, "profile": '


@dataclass(frozen=True)
class Injected:
    fault: Fault
    target: str
    """The process or node hit ("" when there was no node to hit)."""
    outage: Outage | None = None
    at: float = 0.0
    """When it was injected, on the watcher's clock."""
    jobs_before: int = 0
    """Stage Jobs of the rollout seen just before: how far the rollout had come."""


def choose_node(fault: Fault, nodes: Sequence[NodeView], profile: str, rng: random.Random) -> str:
    """A node for ``fault``: a deletion prefers a node being updated, a cordon a schedulable node,
    a malformed record a node not yet updated; "" when the group has no node left."""
    names = [n.name for n in nodes]
    if fault is Fault.DELETE_NODE:
        preferred = disrupted_by(nodes, profile)
    elif fault is Fault.FOREIGN_CORDON:
        preferred = [n.name for n in nodes if not n.unschedulable]
    elif fault is Fault.MALFORMED_ANNOTATION:
        preferred = [n.name for n in nodes if state_key(profile) not in n.annotations]
    elif fault is Fault.TERMINATE_NODE_WORKFLOW:
        # The start claim lasts as long as the node workflow: a claimed node's workflow runs.
        return _pick([n.name for n in nodes if claim_key(profile) in n.annotations], rng)
    else:
        preferred = names
    return _pick(preferred or names, rng)


def _pick(pool: list[str], rng: random.Random) -> str:
    return rng.choice(sorted(pool)) if pool else ""


class Injector:
    def __init__(self, stack: ChaosStack, profile: str, clock: Callable[[], float]) -> None:
        self.stack, self.profile, self.clock = stack, profile, clock

    def inject(self, injection: Injection, nodes: Sequence[NodeView], rng: random.Random) -> Injected:
        return replace(self._inject(injection, nodes, rng), at=self.clock())

    def _inject(self, injection: Injection, nodes: Sequence[NodeView], rng: random.Random) -> Injected:
        fault = injection.fault
        if fault in PROCESS:
            return self._kill(fault, PROCESS[fault], injection.pause)
        if fault is Fault.TEMPORAL_UNREACHABLE:
            start = self.clock()
            self.stack.freeze_temporal()
            try:
                time.sleep(injection.pause)
            finally:
                self.stack.thaw_temporal()
            return Injected(fault, "temporal", (start, self.clock()))
        node = choose_node(fault, nodes, self.profile, rng)
        if node and fault is Fault.TERMINATE_NODE_WORKFLOW:
            self.stack.terminate_workflow(node_workflow_id(self.profile, node))
        elif node:
            self._edit(fault, node)
        return Injected(fault, node)

    def release(self, node: str) -> float:
        """The third party lifts its own cordon; returns when it began (the check's reference)."""
        began = self.clock()
        self.stack.cluster.kubectl("uncordon", node, check=False)
        return began

    def _kill(self, fault: Fault, name: str, pause: float) -> Injected:
        start = self.clock()
        self.stack.kill(name)
        time.sleep(pause)
        self.stack.restart(name)
        return Injected(fault, name, (start, self.clock()))

    def _edit(self, fault: Fault, node: str) -> None:
        kubectl = self.stack.cluster.kubectl
        if fault is Fault.FOREIGN_CORDON:
            kubectl("cordon", node, check=False)
        elif fault is Fault.FOREIGN_LABEL:
            kubectl("label", "node", node, f"{FOREIGN_PREFIX}/touched=yes", "--overwrite", check=False)
        elif fault is Fault.FOREIGN_TAINT:
            kubectl(
                "taint",
                "node",
                node,
                f"{FOREIGN_PREFIX}/maintenance=true:NoSchedule",
                "--overwrite",
                check=False,
            )
        elif fault is Fault.DELETE_NODE:
            kubectl("delete", "node", node, "--wait=false", check=False)
        elif fault is Fault.MALFORMED_ANNOTATION:
            key = state_key(self.profile)
            kubectl("annotate", "node", node, f"{key}={MALFORMED_STATE}", "--overwrite", check=False)
