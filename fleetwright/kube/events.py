"""Events about Nodes (``events.k8s.io/v1``), the human-visible trail of blocks and failures.

An event's name is derived from a caller-given key, so the same occurrence reported twice (a retried
activity, the next pass of a wait) creates one Event: a 409 means it was already said. It must not
decide when something is worth an event (the activities do).
"""

from __future__ import annotations

import hashlib
import socket
from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.kube.errors import classified

NAMESPACE = "default"  # where the kubelet records Node events, so `kubectl describe node` finds ours
REPORTING_CONTROLLER = "fleetwright.io/node-activities"
MAX_NOTE = 1024  # the API rejects longer notes


def event_name(node: str, key: str) -> str:
    digest = hashlib.sha256("\x00".join((node, key)).encode()).hexdigest()[:16]
    return f"{node[:200]}.fw-{digest}"


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
    """Record one Event regarding ``node``; False when the event for ``key`` already exists.
    ``kind`` is ``Normal`` or ``Warning``."""
    now = datetime.now(UTC)
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": event_name(node, key), "namespace": NAMESPACE},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": socket.gethostname()[:128],
        "action": action[:128],
        "reason": reason[:128],
        "note": note[:MAX_NOTE],
        "type": kind,
        "regarding": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid},
    }
    with classified(f"record event {reason} on node {node}"):
        try:
            event = client.EventsV1Event.from_dict(body)
            assert event is not None  # from_dict returns None only for None
            client.EventsV1Api(api).create_namespaced_event(NAMESPACE, event)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
    return True
