"""Service networking for the real test node: what kube-proxy and the cluster DNS give a node's pods.

The local cluster runs neither (no iptables rule may change on the test machine, and no DNS server
image is built), yet the chart's pods reach each other by Service name: the worker reaches the
embedded Temporal at ``<release>-temporal.<namespace>.svc``, and ``helm test`` reaches the webhook.
So the node link (``nodelink``) serves both from inside the node's network namespace, from the
apiserver's Services and EndpointSlices:

- a TCP listener on every Service's ``clusterIP:port`` (the whole Service range is a local route
  in the node, so any of its addresses can be bound), relaying each connection to a ready endpoint,
  as kube-proxy's userspace mode did; a Service without a ready endpoint refuses the connection;
- a DNS responder at the node's address (the kubelet's ``clusterDNS``) answering ``A`` queries for
  ``<service>.<namespace>.svc.<domain>`` with the ClusterIP; every other name is NXDOMAIN.

This module is pure: ``table`` reads the API objects, ``answer`` builds a DNS reply; the node link
does the I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from fleetwright.local.nodeconfig import CLUSTER_DOMAIN

TTL = 5
_A, _IN = 1, 1
_NXDOMAIN, _FORMERR = 3, 1


@dataclass(frozen=True)
class Table:
    """The cluster's ClusterIP Services as the node serves them."""

    backends: dict[tuple[str, int], tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """(clusterIP, port) -> ready (address, port) endpoints."""
    names: dict[str, str] = field(default_factory=dict)
    """``<service>.<namespace>.svc.<domain>`` -> clusterIP."""


def _ready_endpoints(slices: list[dict[str, Any]], port_name: str) -> tuple[tuple[str, int], ...]:
    out = []
    for piece in slices:
        ports = [p["port"] for p in piece.get("ports") or [] if (p.get("name") or "") == port_name]
        for endpoint in piece.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            out += [(address, int(port)) for address in endpoint.get("addresses") or [] for port in ports]
    return tuple(sorted(out))


def table(
    services: list[dict[str, Any]], slices: list[dict[str, Any]], domain: str = CLUSTER_DOMAIN
) -> Table:
    """The Table of ``services`` (a Service list's items) and ``slices`` (EndpointSlices)."""
    by_service: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for piece in slices:
        meta = piece["metadata"]
        owner = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if owner:
            by_service.setdefault((meta["namespace"], owner), []).append(piece)
    backends, names = {}, {}
    for service in services:
        meta, spec = service["metadata"], service.get("spec") or {}
        cluster_ip = spec.get("clusterIP")
        if not cluster_ip or cluster_ip == "None":
            continue
        names[f"{meta['name']}.{meta['namespace']}.svc.{domain}"] = cluster_ip
        pieces = by_service.get((meta["namespace"], meta["name"]), [])
        for port in spec.get("ports") or []:
            if port.get("protocol", "TCP") == "TCP":
                backends[(cluster_ip, int(port["port"]))] = _ready_endpoints(pieces, port.get("name") or "")
    return Table(backends, names)


def _question(message: bytes) -> tuple[str, int, int, int]:
    """(name, type, class, end offset) of the first question; ValueError when it is malformed."""
    labels, offset = [], 12
    while True:
        length = message[offset]
        offset += 1
        if length == 0:
            break
        if length & 0xC0:
            raise ValueError("a compressed name in a question")
        labels.append(message[offset : offset + length].decode("ascii").lower())
        offset += length
    kind, klass = struct.unpack_from("!HH", message, offset)
    return ".".join(labels), kind, klass, offset + 4


def answer(query: bytes, names: dict[str, str]) -> bytes:
    """The reply to one DNS query: an A record for a known Service name, no record (NOERROR) for
    another type of a known name, NXDOMAIN for any other name, FORMERR when it cannot be read."""
    if len(query) < 12:
        return b""
    ident, flags, questions = struct.unpack_from("!HHH", query)
    reply_flags = 0x8400 | (flags & 0x0100)  # a response, authoritative, recursion desired copied
    try:
        if questions != 1:
            raise ValueError("not one question")
        name, kind, klass, end = _question(query)
    except (ValueError, IndexError, struct.error, UnicodeDecodeError):
        return struct.pack("!HHHHHH", ident, reply_flags | _FORMERR, 0, 0, 0, 0)
    address = names.get(name.rstrip("."))
    header_question = query[12:end]
    if address is None:
        return struct.pack("!HHHHHH", ident, reply_flags | _NXDOMAIN, 1, 0, 0, 0) + header_question
    records = b""
    if kind == _A and klass == _IN:
        # The name by a pointer to the question's (offset 12), then the record.
        records = struct.pack("!HHHIH", 0xC00C, _A, _IN, TTL, 4) + bytes(int(b) for b in address.split("."))
    count = 1 if records else 0
    return struct.pack("!HHHHHH", ident, reply_flags, 1, count, 0, 0) + header_question + records
