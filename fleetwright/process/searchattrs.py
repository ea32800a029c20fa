"""Which of fleetwright's search attributes the worker's Temporal namespace lacks.

A workflow task that upserts an unregistered search attribute is rejected by the server, again and
again: the rollout never starts and only the worker's log says why. So the worker asks the
namespace once before it polls and every minute after (registering them later is picked up without
a restart); the observe-and-decide activity reports what is missing, the workflows upsert only
what is registered, and the NodeProfile's status names the missing ones.

Owns the check; what the workflows upsert is theirs (``workflows.search``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError

from fleetwright.eventwait import wait_event
from fleetwright.workflows.search import REGISTRATION

log = logging.getLogger("fleetwright.worker")

RECHECK_SECONDS = 60.0
_TYPE_PREFIX = "INDEXED_VALUE_TYPE_"


def type_name(indexed: int) -> str:
    """``INDEXED_VALUE_TYPE_KEYWORD_LIST`` -> ``KeywordList``, as the CLI and ``REGISTRATION`` spell it."""
    words = IndexedValueType.Name(indexed).removeprefix(_TYPE_PREFIX).split("_")  # type: ignore[arg-type]
    return "".join(word.capitalize() for word in words)


def missing(registered: Mapping[str, str], wanted: Mapping[str, str] = REGISTRATION) -> tuple[str, ...]:
    """Pure: the wanted attributes absent from ``registered`` (name -> type) or registered with
    another type (an upsert of either is rejected)."""
    return tuple(sorted(name for name, kind in wanted.items() if registered.get(name) != kind))


class SearchAttributeCheck:
    """The namespace's missing search attributes, as last checked (none until a check says so, and
    none when the server does not let this worker list them: then upserts go ahead as before)."""

    def __init__(self, client: Client, namespace: str) -> None:
        self._client = client
        self._namespace = namespace
        self.missing: tuple[str, ...] = ()

    def __call__(self) -> tuple[str, ...]:
        return self.missing

    async def check(self) -> None:
        try:
            response = await self._client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=self._namespace)
            )
        except RPCError as error:
            log.info("cannot list the search attributes of namespace %s (%s)", self._namespace, error)
            return
        registered = {name: type_name(kind) for name, kind in response.custom_attributes.items()}
        now = missing(registered)
        if now and now != self.missing:
            log.warning(
                "Temporal namespace %s lacks the search attributes %s: rollouts run without them "
                "(their NodeProfiles' Searchable condition says so)",
                self._namespace,
                ", ".join(now),
            )
        elif self.missing and not now:
            log.info("the search attributes of namespace %s are registered now", self._namespace)
        self.missing = now

    async def run(self, stop: asyncio.Event) -> None:
        """Check again every minute until ``stop``."""
        while not stop.is_set():
            await wait_event(stop, RECHECK_SECONDS)
            if not stop.is_set():
                await self.check()
