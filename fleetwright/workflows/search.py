"""fleetwright's Temporal search attributes: what makes rollouts and nodes findable in the UI and
readable without a running worker. The dev server registers ``REGISTRATION`` at start; a namespace
that lacks some gets only the others (``upsert``), and the rollout's status names the missing ones
(the worker checks, ``worker.searchattrs``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

PROFILE = SearchAttributeKey.for_keyword("FleetwrightProfile")
PHASE = SearchAttributeKey.for_keyword("FleetwrightPhase")
NODE = SearchAttributeKey.for_keyword("FleetwrightNode")
PACKAGES = SearchAttributeKey.for_keyword_list("FleetwrightPackages")
NODES_DONE = SearchAttributeKey.for_int("FleetwrightNodesDone")
NODES_FAILED = SearchAttributeKey.for_int("FleetwrightNodesFailed")
NODES_BLOCKED = SearchAttributeKey.for_int("FleetwrightNodesBlocked")

# name -> type, as `temporal server start-dev --search-attribute NAME=TYPE` and the operator API take it.
REGISTRATION = {
    PROFILE.name: "Keyword",
    PHASE.name: "Keyword",
    NODE.name: "Keyword",
    PACKAGES.name: "KeywordList",
    NODES_DONE.name: "Int",
    NODES_FAILED.name: "Int",
    NODES_BLOCKED.name: "Int",
}


def upsert(updates: Sequence[SearchAttributeUpdate[Any]], unregistered: Collection[str]) -> None:
    """Upsert the updates whose attribute the namespace has: one it lacks would make the server
    reject the whole workflow task, every time it is retried."""
    kept = [update for update in updates if update.key.name not in unregistered]
    if kept:
        workflow.upsert_search_attributes(kept)
