"""Bounded watch windows: block until something changes (or a few seconds pass), the building block
of every wait in the activities.

It owns the watch mechanics (``timeout_seconds``, 410 Gone, stopping at the first event). It must
not decide what a change means: callers re-list after every wake-up (level-triggered), so a missed
or expired watch costs one window, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from fleetwright.kube.errors import classified

HTTP_GONE = 410


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
    watcher = watch.Watch()  # type: ignore[no-untyped-call]
    with classified(what):
        stream = watcher.stream(  # type: ignore[no-untyped-call]
            list_call,
            *args,
            resource_version=resource_version,
            timeout_seconds=timeout,
            # A server that never closes the window must not hang the activity's thread.
            _request_timeout=timeout + 10,
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
