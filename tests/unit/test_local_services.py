"""The real test node's Service networking, pure parts: the table read from Services and
EndpointSlices, and the DNS replies for Service names (``local.services``)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from fleetwright.local import services

pytestmark = pytest.mark.unit


def service(name: str, ip: str, *ports: tuple[str, int]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "fw"},
        "spec": {"clusterIP": ip, "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in ports]},
    }


def endpoint_slice(owner: str, ports: dict[str, int], *endpoints: tuple[str, bool]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "fw", "labels": {"kubernetes.io/service-name": owner}},
        "ports": [{"name": n, "port": p} for n, p in ports.items()],
        "endpoints": [{"addresses": [a], "conditions": {"ready": r}} for a, r in endpoints],
    }


def test_a_service_port_is_served_by_its_ready_endpoints_on_the_target_port() -> None:
    table = services.table(
        [
            service("temporal", "10.96.3.4", ("grpc", 7233), ("ui", 8233)),
            service("headless", "None", ("x", 1)),
            service("empty", "10.96.3.5", ("", 80)),
        ],
        [endpoint_slice("temporal", {"grpc": 7233, "ui": 8080}, ("10.88.0.7", True), ("10.88.0.8", False))],
    )
    assert table.backends == {
        ("10.96.3.4", 7233): (("10.88.0.7", 7233),),
        ("10.96.3.4", 8233): (("10.88.0.7", 8080),),
        ("10.96.3.5", 80): (),
    }
    assert table.names == {
        "temporal.fw.svc.cluster.local": "10.96.3.4",
        "empty.fw.svc.cluster.local": "10.96.3.5",
    }


def query(name: str, kind: int = 1, ident: int = 0x1234) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", kind, 1)


def test_a_service_name_resolves_to_its_cluster_ip() -> None:
    names = {"temporal.fw.svc.cluster.local": "10.96.3.4"}
    reply = services.answer(query("Temporal.fw.svc.cluster.local"), names)
    ident, flags, questions, answers = struct.unpack_from("!HHHH", reply)
    assert (ident, flags & 0x800F, questions, answers) == (0x1234, 0x8000, 1, 1)
    assert reply[-4:] == bytes([10, 96, 3, 4])
    # Another type of a known name: no record, no error (the resolver asks AAAA beside A).
    reply = services.answer(query("temporal.fw.svc.cluster.local", kind=28), names)
    assert struct.unpack_from("!HHHH", reply)[1:] == (0x8500, 1, 0)


def test_any_other_name_is_nxdomain_and_garbage_is_a_format_error() -> None:
    names = {"temporal.fw.svc.cluster.local": "10.96.3.4"}
    # The search list's first tries (a name with too few dots) must fail for the next to be tried.
    reply = services.answer(query("temporal.fw.svc.fw.svc.cluster.local"), names)
    assert struct.unpack_from("!H", reply, 2)[0] & 0xF == 3
    assert struct.unpack_from("!H", services.answer(b"\x00\x01" + b"\xff" * 12, names), 2)[0] & 0xF == 1
    assert services.answer(b"\x00", names) == b""
