"""What every Job fleetwright runs on a node shares, stage Jobs and validation Jobs alike: the
labels ``fleetwright logs`` and the stage waits select on, the tolerations that let a pod run on
a cordoned, tainted or rebooting node, the unprivileged container context, and names made safe
(DNS labels, label values, deterministic hashed Job names). Pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fleetwright.api import keys

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MAX_DNS_LABEL = 63
_HASH_CHARS = 10


def short_hash(*parts: object) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()[:_HASH_CHARS]


def dns_label(value: str, limit: int = MAX_DNS_LABEL) -> str:
    """``value`` made into a DNS label; too long or unsafe values keep a prefix plus a hash."""
    clean = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-") or "x"
    if len(clean) <= limit and clean == value:
        return clean
    return f"{clean[: limit - _HASH_CHARS - 1].rstrip('-')}-{short_hash(value)}"


def label_value(value: str) -> str:
    if len(value) <= MAX_DNS_LABEL and _LABEL_VALUE.match(value):
        return value
    return dns_label(value)


def hashed_name(head: str, parts: Sequence[object], pass_id: str = "") -> str:
    """``<head>-<hash of parts (and the pass)>``, at most 63 characters: the same parts give the
    same name, so a retried activity adopts the Job its earlier attempt created."""
    digest = short_hash(*parts, pass_id) if pass_id else short_hash(*parts)
    room = MAX_DNS_LABEL - _HASH_CHARS - 1
    return f"{dns_label(head, room)[:room].rstrip('-')}-{digest}"


def job_labels(
    profile: str, node: str, package: str, stage: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The labels of a Job and its pods: profile, node, package, stage, managed-by (and ``extra``)."""
    out = {
        keys.PROFILE_LABEL: label_value(profile),
        keys.NODE_LABEL: label_value(node),
        keys.PACKAGE_LABEL: label_value(package),
        keys.STAGE_LABEL: label_value(stage),
        keys.MANAGED_BY_LABEL: keys.MANAGED_BY,
    }
    out.update(extra or {})
    return out


def node_tolerations(
    runtime_required_taint: str, extra: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """A pod pinned to a node fleetwright works on: it runs cordoned, under the runtime-required
    taint and through a reboot (NotReady, unreachable), plus the profile's own tolerations."""
    base: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        {"key": runtime_required_taint, "operator": "Exists"},
        # Unbounded: a reboot makes the node NotReady, and the pod must not be evicted for it.
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists"},
    ]
    return base + [dict(t) for t in extra]


def unprivileged() -> dict[str, Any]:
    """A container context with no root, no capabilities, nothing writable."""
    return {
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
