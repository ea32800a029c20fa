"""fleetwright's Temporal search attributes: what makes rollouts and nodes findable in the UI and
readable without a running worker. The dev server registers ``REGISTRATION`` at start."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

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
