"""Bounded watch windows: block until something changes (or a few seconds pass), the building block
of every wait in the activities.

It owns the watch mechanics (``timeout_seconds``, 410 Gone, stopping at the first event). It must
not decide what a change means: callers re-list after every wake-up (level-triggered), so a missed
or expired watch costs one window, never a wrong answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from fleetwright.kube.errors import classified

HTTP_GONE = 410


def watch_events(
    list_call: Callable[..., Any],
    *args: Any,
    resource_version: str,
    timeout_seconds: int,
    request_timeout: float,
    **options: Any,
) -> Generator[dict[str, Any], None, None]:
    """The events of one watch window from ``resource_version``, each decoded once into the
    apiserver's JSON shape: ``{"type": ..., "object": {...}}``, bookmarks and ERROR events (410
    Gone: the version expired; the caller relists) included.

    Not the client's ``Watch.stream``: it decodes every event, encodes its object again and decodes
    that into the client's model classes, which cost the worker more CPU than anything else it did
    in a 1,000-node rollout (each stage Job and pod changes a dozen times); every caller here
    reads dicts. ``request_timeout`` bounds a connection the server never closes."""
    response = list_call(
        *args,
        watch=True,
        resource_version=resource_version,
        timeout_seconds=timeout_seconds,
        _request_timeout=request_timeout,
        _preload_content=False,
        **options,
    )
    try:
        for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
            if not line.strip():
                continue
            event: dict[str, Any] = json.loads(line)
            yield event
    finally:
        response.close()
        response.release_conn()


def wait_for_change(
    list_call: Callable[..., Any],
    *args: Any,
    resource_version: str,
    seconds: float,
    what: str,
    **selectors: Any,
) -> bool:
    """Watch ``list_call`` from ``resource_version`` for at most ``seconds`` (at least one: the API
    counts whole seconds). True when an event arrived or the version expired (re-list either way),
    False when the window passed quietly."""
    timeout = max(1, round(seconds))
    with classified(what):
        stream = watch_events(
            list_call,
            *args,
            resource_version=resource_version,
            timeout_seconds=timeout,
            # A server that never closes the window must not hang the activity's thread.
            request_timeout=timeout + 10,
            **selectors,
        )
        try:
            return next(stream, None) is not None
        except ApiException as error:
            if error.status == HTTP_GONE:
                return True  # the caller re-lists and watches from a fresh version
            raise
        finally:
            stream.close()


def list_version(listing: Any) -> str:
    """The resourceVersion of a list response: where a watch for changes after it starts."""
    metadata = listing.metadata
    return str(metadata.resource_version) if metadata is not None else ""
