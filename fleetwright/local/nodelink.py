"""The network between the real test node and the host's loopback, as a userspace relay.

The control plane and Temporal listen on the host's loopback only, and the real node lives in a
network namespace of its own, so this process links the two without a route, a veth, a bridge or
an iptables rule on the host:

- listeners *inside* the node's namespace (``--listen NODE_IP:PORT=HOST_PORT``): the node and its
  pods reach the apiserver at the ``kubernetes`` Service address and Temporal at the node's own
  address, relayed to ``127.0.0.1:HOST_PORT`` on the host;
- an HTTP CONNECT proxy on a Unix socket (``--egress PATH``), the apiserver's egress selector for
  cluster traffic: webhooks (pod addresses), ``pods/log`` (the kubelet), and kwok's loopback
  kubelet endpoint. A destination in ``--node-net`` is dialled from inside the node's namespace,
  anything else from the host's;
- Service networking for the node's pods (``--services``, ``--dns``): a listener on every Service's
  ClusterIP relayed to its ready endpoints, and a DNS responder for Service names
  (``services`` says what and why).

A socket belongs to the network namespace it was created in, so this process enters the node's
namespace only for the instant of ``socket()`` and runs everything else on the host.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ipaddress
import itertools
import json
import os
import socket
import ssl
import sys
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

from fleetwright.local import services

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@contextlib.contextmanager
def entered(netns: str) -> Iterator[None]:
    """Run the block in the network namespace at ``netns`` (this thread only), then come back."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)


def node_socket(netns: str, kind: socket.SocketKind = socket.SOCK_STREAM) -> socket.socket:
    with entered(netns):
        sock = socket.socket(socket.AF_INET, kind)
    sock.setblocking(False)
    return sock


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _relay(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    await asyncio.gather(_pipe(client[0], upstream[1]), _pipe(upstream[0], client[1]))


class Link:
    def __init__(self, netns: str, node_nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
        self.netns = netns
        self.node_nets = node_nets

    def in_node(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.node_nets)

    async def dial(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if not self.in_node(host):
            return await asyncio.open_connection(host, port)
        sock = node_socket(self.netns)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

    async def listen(self, address: str, port: int, host_port: int) -> asyncio.Server:
        sock = node_socket(self.netns)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                upstream = await asyncio.open_connection("127.0.0.1", host_port)
            except OSError:
                writer.close()
                return
            await _relay((reader, writer), upstream)

        return await asyncio.start_server(serve, sock=sock, backlog=128)

    async def egress(self, path: str) -> asyncio.Server:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
                method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                host, _, port = target.rpartition(":")
                if method != "CONNECT" or not port.isdigit():
                    raise ValueError(f"not a CONNECT request: {method} {target}")
                upstream = await self.dial(host.strip("[]"), int(port))
            except (OSError, ValueError, asyncio.IncompleteReadError) as error:
                with contextlib.suppress(Exception):
                    writer.write(f"HTTP/1.1 503 Service Unavailable\r\n\r\n{error}".encode())
                    writer.close()
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _relay((reader, writer), upstream)

        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return await asyncio.start_unix_server(serve, path=path)


class ServiceProxy:
    """ClusterIP listeners and the DNS responder, from the apiserver's Services, polled each second."""

    def __init__(
        self, link: Link, fetch: Callable[[], services.Table], reserved: set[tuple[str, int]]
    ) -> None:
        self.link = link
        self.fetch = fetch
        self.reserved = reserved
        """Addresses the node link already listens on (the kubernetes Service's): never a Service's."""
        self.table = services.Table()
        self.listeners: dict[tuple[str, int], asyncio.Server] = {}
        self._turn = itertools.count()

    async def run(self, interval: float = 1.0) -> None:
        while True:
            # The link starts before the apiserver: until it answers, the table stays as it was.
            with contextlib.suppress(OSError, ValueError):
                self.table = await asyncio.to_thread(self.fetch)
            await self._reconcile()
            await asyncio.sleep(interval)

    async def _reconcile(self) -> None:
        wanted = set(self.table.backends) - self.reserved
        for key in set(self.listeners) - wanted:
            self.listeners.pop(key).close()
        for key in wanted - set(self.listeners):
            with contextlib.suppress(OSError):
                self.listeners[key] = await self._listen(key)

    async def _listen(self, key: tuple[str, int]) -> asyncio.Server:
        sock = node_socket(self.link.netns)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(key)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            ready = self.table.backends.get(key, ())
            try:
                if not ready:
                    raise ConnectionRefusedError(f"no ready endpoint behind {key[0]}:{key[1]}")
                upstream = await self.link.dial(*ready[next(self._turn) % len(ready)])
            except OSError:
                writer.close()
                return
            await _relay((reader, writer), upstream)

        return await asyncio.start_server(serve, sock=sock, backlog=128)

    async def dns(self, address: str, port: int) -> asyncio.DatagramTransport:
        sock = node_socket(self.link.netns, socket.SOCK_DGRAM)
        sock.bind((address, port))
        proxy = self

        class Responder(asyncio.DatagramProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport

            def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
                reply = services.answer(data, proxy.table.names)
                if reply:
                    self.transport.sendto(reply, addr)  # type: ignore[attr-defined]

        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(Responder, sock=sock)
        return transport


def api_fetcher(server: str, ca: str, cert: str, key: str) -> Callable[[], services.Table]:
    """Reads the Services and EndpointSlices from the apiserver at ``server`` (client certificate)."""
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(cert, key)

    def items(path: str) -> list[dict[str, Any]]:
        with urllib.request.urlopen(server + path, context=context, timeout=5) as response:
            return list(json.load(response)["items"])

    def fetch() -> services.Table:
        return services.table(items("/api/v1/services"), items("/apis/discovery.k8s.io/v1/endpointslices"))

    return fetch


def _listen_spec(text: str) -> tuple[str, int, int]:
    """``ADDRESS:PORT=HOST_PORT``."""
    inside, _, host_port = text.partition("=")
    address, _, port = inside.rpartition(":")
    return address, int(port), int(host_port)


async def serve(args: argparse.Namespace) -> None:
    link = Link(args.netns, [ipaddress.ip_network(n) for n in args.node_net])
    listens = [_listen_spec(spec) for spec in args.listen]
    servers = [await link.listen(*spec) for spec in listens]
    if args.egress:
        servers.append(await link.egress(args.egress))
    tasks: list[Any] = [server.serve_forever() for server in servers]
    if args.services:
        fetch = api_fetcher(args.services, args.ca, args.client_cert, args.client_key)
        proxy = ServiceProxy(link, fetch, {(address, port) for address, port, _ in listens})
        if args.dns:
            address, _, port = args.dns.rpartition(":")
            await proxy.dns(address, int(port))
        tasks.append(proxy.run())
    print("ready", flush=True)
    await asyncio.gather(*tasks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetwright.local.nodelink")
    parser.add_argument("--netns", required=True, help="the node's network namespace (/proc/PID/ns/net)")
    parser.add_argument("--node-net", action="append", default=[], help="addresses dialled inside the node")
    parser.add_argument("--listen", action="append", default=[], help="NODE_ADDRESS:PORT=HOST_PORT")
    parser.add_argument("--egress", help="Unix socket of the apiserver's CONNECT egress proxy")
    parser.add_argument("--services", help="apiserver URL: serve its ClusterIP Services inside the node")
    parser.add_argument("--dns", help="NODE_ADDRESS:PORT of the DNS responder for Service names")
    parser.add_argument("--ca", help="the apiserver's CA (with --services)")
    parser.add_argument("--client-cert", help="client certificate for the apiserver (with --services)")
    parser.add_argument("--client-key", help="its key")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
