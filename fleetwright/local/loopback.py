"""Loopback ports and liveness probes every local service uses: a free port to listen on (below
the kernel's ephemeral range) and whether a URL answers 200.
"""

from __future__ import annotations

import random
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

LOOPBACK = "127.0.0.1"
PORT_FLOOR, PORT_CEILING = 20000, 32768
"""Where ``free_port`` draws: above the well-known services, below Linux's default ephemeral range."""
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port(below: int | None = None) -> int:
    """A loopback port nobody listens on now, drawn at random from 20000 up to the kernel's
    ephemeral range (or ``below``, if lower). The kernel hands ephemeral ports to every outgoing
    connection and every ``bind(0)``, so a port it picked for us could be taken by another socket
    before the service binds it; a port under the range can only collide with another draw.
    Where the range starts too low to leave such ports, the kernel's pick."""
    ceiling = min(_ephemeral_start(), below or PORT_CEILING)
    if ceiling <= PORT_FLOOR:
        if below is not None:
            raise RuntimeError(f"no free loopback port below {below}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            return int(sock.getsockname()[1])
    draw = random.SystemRandom()
    for _ in range(200):
        port = draw.randrange(PORT_FLOOR, ceiling)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port from {PORT_FLOOR} below {ceiling}")


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (``net.ipv4.ip_local_port_range``)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return PORT_CEILING


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    """Whether ``url`` answers 200 within two seconds."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False
