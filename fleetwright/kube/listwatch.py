"""Long-running list + watch loops (informers without a cache) for the controller's watchers and
the worker's shared stage-Job watch.

Owns the mechanics: a full list that yields a snapshot and a resourceVersion, watches resumed from
the last version seen, a relist after 410 Gone (or any watch ERROR event), capped exponential
backoff on failures, and stopping within one watch window. Objects are delivered as plain dicts in
the apiserver's JSON shape. It must not decide what a change means: the caller's ``deliver``
callback does, and it runs on the watcher's own thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.api.common import VERSION
from fleetwright.api.keys import GROUP
from fleetwright.kube.client import fetch_json
from fleetwright.kube.errors import classified
from fleetwright.kube.watching import HTTP_GONE, watch_events

log = logging.getLogger(__name__)

# Objects per list request: a relist of 10,000 Nodes or tens of thousands of stage Jobs is many
# modest responses, not one of hundreds of MB.
LIST_PAGE = 500

EventType = Literal["SYNC", "ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class WatchEvent:
    """One change, or (``SYNC``) a fresh snapshot of every object after a (re)list."""

    type: EventType
    obj: dict[str, Any] | None = None
    items: tuple[dict[str, Any], ...] = ()


Deliver = Callable[[WatchEvent], None]


@dataclass
class ListWatch:
    """List then watch one resource kind until ``stop`` is set (run ``run`` on a thread)."""

    api: client.ApiClient
    kind: Literal["nodeprofiles", "deploymentpolicies", "nodes", "jobs", "pods"]
    deliver: Deliver
    stop: threading.Event
    namespace: str = ""
    """Where a namespaced kind (jobs, pods) is listed."""
    label_selector: str = ""
    slim: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Applied to every object as it arrives, before it is kept: drops what the caller never reads
    (a stage Job's pod template), so a relist of tens of thousands of objects stays small."""
    lost: Callable[[], None] | None = None
    """Called on the watcher's thread when a list or watch failed (what was delivered may be stale)."""
    window_seconds: int = 30
    """A watch request's server-side timeout: also the bound on how long stopping takes."""
    max_backoff_seconds: float = 30.0
    _backoff: float = field(default=0.0, init=False)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                version = self._list()
                self._backoff = 0.0
                while not self.stop.is_set() and version:
                    version = self._watch(version)
            except Exception as error:  # the loop must outlive any API trouble; say so and back off
                if self.stop.is_set():
                    return  # stopping: a watch cut short by the shutdown is no failure
                self._backoff = min(self.max_backoff_seconds, max(0.5, self._backoff * 2))
                log.warning("watch %s failed (%s); relisting in %.1fs", self.kind, error, self._backoff)
                if self.lost is not None:
                    self.lost()
                self.stop.wait(self._backoff)

    # ----- the two halves ---------------------------------------------------------------------
    def _list(self) -> str:
        """One consistent snapshot, read in pages (every page is of the first page's version)."""
        func, args = self._list_call()
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            paging: dict[str, Any] = {"limit": LIST_PAGE, **({"_continue": token} if token else {})}
            with classified(f"list {self.kind}"):
                listing = fetch_json(func, *args, **paging, **self._selectors())
            page = cast(list[dict[str, Any]], listing.get("items") or [])
            items += map(self.slim, page) if self.slim is not None else page
            metadata = listing.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token or self.stop.is_set():
                break
        if not self.stop.is_set():
            self.deliver(WatchEvent("SYNC", items=tuple(items)))
        return str(metadata.get("resourceVersion") or "")

    def _watch(self, version: str) -> str:
        """Watch from ``version``; the version to resume from, or "" to relist."""
        func, args = self._list_call()
        stream = watch_events(
            func,
            *args,
            resource_version=version,
            timeout_seconds=self.window_seconds,
            allow_watch_bookmarks=True,
            # A connection the server never closes must not hang the thread forever.
            request_timeout=self.window_seconds + 15,
            **self._selectors(),
        )
        # 410 Gone is checked before ``classified`` sees it: it is the normal "relist now" answer
        # (an expired version), not a failure to back off from.
        with classified(f"watch {self.kind}"):
            try:
                for event in stream:
                    if self.stop.is_set():
                        return ""
                    kind = event.get("type")
                    if kind == "ERROR":
                        return ""  # expired or refused: relist
                    raw = event.get("object") or {}
                    version = str((raw.get("metadata") or {}).get("resourceVersion") or version)
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self.deliver(WatchEvent(kind, obj=self.slim(raw) if self.slim else raw))
            except ApiException as error:
                if error.status == HTTP_GONE:
                    return ""
                raise
            finally:
                stream.close()
        return version

    def _list_call(self) -> tuple[Callable[..., Any], tuple[str, ...]]:
        if self.kind == "nodes":
            return client.CoreV1Api(self.api).list_node, ()
        if self.kind == "jobs":
            return client.BatchV1Api(self.api).list_namespaced_job, (self.namespace,)
        if self.kind == "pods":
            return client.CoreV1Api(self.api).list_namespaced_pod, (self.namespace,)
        return client.CustomObjectsApi(self.api).list_cluster_custom_object, (GROUP, VERSION, self.kind)

    def _selectors(self) -> dict[str, str]:
        return {"label_selector": self.label_selector} if self.label_selector else {}


def start_thread(watcher: ListWatch) -> threading.Thread:
    """Run ``watcher`` on a daemon thread (a stuck API call must never keep the process alive)."""
    thread = threading.Thread(target=watcher.run, name=f"watch-{watcher.kind}", daemon=True)
    thread.start()
    return thread
