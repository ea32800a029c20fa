"""The controller's view of the Nodes (``NodeWatch``): each node's foreign labels, a coalesced
``nodes_changed`` signal to every rollout this controller signalled when they change (a fleet
joining costs one round), and the runtime-required taint on a node that just joined, the fallback
for one admitted while the webhook was unreachable (idempotent: two replicas adding it agree).
It decides nothing about a rollout: the workflows re-observe the fleet when signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from fleetwright.api.keys import PREFIX, RUNTIME_REQUIRED_TAINT
from fleetwright.api.nodeprofile import parse_profiles
from fleetwright.errors import FleetwrightError, RetryableError
from fleetwright.kube import nodes as kube_nodes
from fleetwright.kube.client import ApiClient
from fleetwright.kube.events import emit
from fleetwright.kube.listwatch import WatchEvent
from fleetwright.planner.profile.runtime import taint_on_join
from fleetwright.workflows.ids import rollout_workflow_id
from fleetwright.workflows.rollout import RolloutWorkflow

log = logging.getLogger("fleetwright.controller")

TAINT_ATTEMPTS = 10


class NodeWatch:
    """The Nodes as the controller sees them. ``profiles`` is the controller's cache of the
    NodeProfile objects (read, never written) and ``rollouts`` the names of the profiles whose
    rollouts it signalled; ``delay_seconds`` coalesces node churn into one signal per rollout."""

    def __init__(
        self,
        client: Client,
        api: ApiClient,
        profiles: dict[str, dict[str, Any]],
        rollouts: Iterable[str],
        delay_seconds: float,
    ) -> None:
        self.client, self.api, self.profiles, self.rollouts = client, api, profiles, rollouts
        self.delay_seconds = delay_seconds
        self.node_labels: dict[str, dict[str, str]] = {}
        self._signalling: asyncio.Task[None] | None = None
        self._pending = False
        self._tainting: set[asyncio.Task[None]] = set()

    def apply(self, event: WatchEvent) -> None:
        """Fold in a Node watch event: taint a joined node if wanted, signal the rollouts soon if
        a node's foreign labels changed."""
        if event.type == "SYNC":
            fresh = {o["metadata"]["name"]: _foreign_labels(o) for o in event.items}
            changed = bool(self.node_labels) and fresh != self.node_labels
            self.node_labels = fresh
        else:
            assert event.obj is not None
            name, labels = event.obj["metadata"]["name"], _foreign_labels(event.obj)
            if event.type == "DELETED":
                changed = self.node_labels.pop(name, None) is not None
            else:
                if event.type == "ADDED":
                    self._taint_if_wanted(event.obj)
                changed = self.node_labels.get(name) != labels
                self.node_labels[name] = labels
        self._pending = self._pending or changed
        if changed and (self._signalling is None or self._signalling.done()):
            self._signalling = asyncio.create_task(self._signal_nodes_changed())

    def stop(self) -> None:
        """Cancel the signalling round under way, if any."""
        if self._signalling is not None:
            self._signalling.cancel()

    def _taint_if_wanted(self, node: dict[str, Any]) -> None:
        meta = node["metadata"]
        profiles = parse_profiles(list(self.profiles.values()))
        wanting = taint_on_join(meta.get("labels") or {}, meta.get("annotations") or {}, profiles)
        if wanting:
            task = asyncio.create_task(self._taint(meta["name"], meta.get("uid") or "", wanting))
            self._tainting.add(task)
            task.add_done_callback(self._tainting.discard)

    async def _taint(self, node: str, uid: str, profiles: tuple[str, ...]) -> None:
        """Taint a joined node for the runtime-required profiles that target it (unless the webhook
        did at admission), with an Event either way."""
        try:
            added = await self._add_taint(node)
            how = "tainted" if added else "tainted at admission:"
            await asyncio.to_thread(
                emit,
                self.api,
                node=node,
                node_uid=uid,
                kind="Normal",
                reason="RuntimeTaintAdded",
                action="Taint",
                note=f"{how} {RUNTIME_REQUIRED_TAINT}:NoSchedule until {', '.join(profiles)} complete",
                key=f"{uid}/runtime-taint",
            )
        except FleetwrightError as error:
            log.warning("node %s: could not add the runtime-required taint: %s", node, error)

    async def _add_taint(self, node: str) -> bool:
        # A node that just registered is still being written (kwok or the kubelet, the node
        # lifecycle controller's own taints): a conflict is expected, and waiting for the next
        # resync would let workloads land first, so re-read and try again a few times.
        for attempt in range(TAINT_ATTEMPTS):
            try:
                return await asyncio.to_thread(kube_nodes.add_runtime_taint, self.api, node)
            except RetryableError:
                if attempt == TAINT_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.1 * (attempt + 1))
        return False

    async def _signal_nodes_changed(self) -> None:
        # Loop, so a change that arrives while the signals go out gets its own round.
        while self._pending:
            await asyncio.sleep(self.delay_seconds)
            self._pending = False
            for name in sorted(self.rollouts):
                with contextlib.suppress(RPCError):  # a finished rollout has nothing to re-observe
                    await self.client.get_workflow_handle(rollout_workflow_id(name)).signal(
                        RolloutWorkflow.nodes_changed
                    )


def _foreign_labels(node: dict[str, Any]) -> dict[str, str]:
    """A node's labels minus fleetwright's own, which the node workflows write: our own writes
    must not wake every rollout."""
    labels = node["metadata"].get("labels") or {}
    return {k: v for k, v in labels.items() if not k.startswith(PREFIX)}
