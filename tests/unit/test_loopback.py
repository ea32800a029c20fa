"""free_port draws below the kernel's ephemeral range, where no outgoing connection or ``bind(0)``
of another process can take the port before the service binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from fleetwright.local import loopback
from fleetwright.local.loopback import LOOPBACK, PORT_CEILING, PORT_FLOOR, free_port

pytestmark = pytest.mark.unit


def ephemeral_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text(text)
    monkeypatch.setattr(loopback, "EPHEMERAL_RANGE", ranges)


def test_a_free_port_lies_under_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ephemeral_from(monkeypatch, tmp_path, "25000\t60999\n")
    ports = {free_port() for _ in range(50)}
    assert all(PORT_FLOOR <= p < 25000 for p in ports), ports
    assert len(ports) > 1  # drawn, not one fixed port


def test_below_lowers_the_ceiling_and_the_port_is_free() -> None:
    port = free_port(below=21000)
    assert PORT_FLOOR <= port < 21000
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, port))


def test_an_unreadable_range_falls_back_to_linuxs_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(loopback, "EPHEMERAL_RANGE", tmp_path / "absent")
    assert PORT_FLOOR <= free_port() < PORT_CEILING


def test_a_range_leaving_no_room_takes_the_kernels_pick(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ephemeral_from(monkeypatch, tmp_path, "1024 65535")
    assert free_port() >= 1024
    with pytest.raises(RuntimeError, match="below 21000"):
        free_port(below=21000)
