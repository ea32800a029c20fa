"""Events (``events.k8s.io/v1``): the human-visible trail on Nodes (blocks, failures) and on
fleetwright's own objects (rollout started, paused, halted, complete).

An event's name is derived from a caller-given key, so the same occurrence reported twice (a retried
activity, the next pass of a wait, a second controller replica) creates one Event: a 409 means it
was already said. It must not decide when something is worth an event (the callers do).
"""

from __future__ import annotations

import hashlib
import socket
from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.api.keys import CONTROLLER_REPORTER, NODE_ACTIVITIES_REPORTER
from fleetwright.kube.errors import classified

# Node and cluster-scoped objects' events live in "default", where `kubectl describe` finds them.
NAMESPACE = "default"
MAX_NOTE = 1024  # the API rejects longer notes


def event_name(name: str, key: str) -> str:
    digest = hashlib.sha256("\x00".join((name, key)).encode()).hexdigest()[:16]
    return f"{name[:200]}.fw-{digest}"


def emit_for(
    api: client.ApiClient,
    *,
    api_version: str,
    kind: str,
    name: str,
    uid: str,
    type_: str,
    reason: str,
    note: str,
    key: str,
    action: str | None = None,
    reporting_controller: str = CONTROLLER_REPORTER,
) -> bool:
    """Record one Event regarding the cluster-scoped object ``kind/name``; False when the Event for
    ``key`` already exists. ``type_`` is ``Normal`` or ``Warning``."""
    now = datetime.now(UTC)
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": event_name(name, key), "namespace": NAMESPACE},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": reporting_controller,
        "reportingInstance": socket.gethostname()[:128],
        "action": (action or reason)[:128],
        "reason": reason[:128],
        "note": note[:MAX_NOTE],
        "type": type_,
        "regarding": {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid},
    }
    with classified(f"record event {reason} on {kind} {name}"):
        try:
            event = client.EventsV1Event.from_dict(body)
            assert event is not None  # from_dict returns None only for None
            client.EventsV1Api(api).create_namespaced_event(NAMESPACE, event)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
    return True


def emit(
    api: client.ApiClient,
    *,
    node: str,
    node_uid: str,
    kind: str,
    reason: str,
    action: str,
    note: str,
    key: str,
) -> bool:
    """Record one Event regarding ``node`` for the node activities. ``kind`` is ``Normal`` or
    ``Warning``."""
    return emit_for(
        api,
        api_version="v1",
        kind="Node",
        name=node,
        uid=node_uid,
        type_=kind,
        reason=reason,
        note=note,
        key=key,
        action=action,
        reporting_controller=NODE_ACTIVITIES_REPORTER,
    )
