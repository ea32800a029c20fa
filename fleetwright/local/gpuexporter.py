"""A GPU metrics exporter for the local stack: serves dcgm-exporter-shaped series for the simulated
nodes' GPUs on loopback, for the local Prometheus to scrape, and lets a test (or a user of
``cluster up``) make a GPU go bad, make a node's series disappear, or make every scrape fail.

The series are dcgm-exporter's, named as in its ``etc/default-counters.csv`` (the health fields
fleetwright's metric checks read: the last XID, uncorrectable remapped rows, row-remap failure,
PCIe replays) with its labels (``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``,
``Hostname``, ``DCGM_FI_DRIVER_VERSION``); any other metric name can be set too, because
dcgm-exporter renamed fields across releases and a check names its metric. A node the exporter
serves has every health series of every GPU at 0 (healthy) until one is set.

Owns that HTTP server (stdlib, a thread of the process that starts it) and its control API:

- ``GET /metrics``: the Prometheus text format (HTTP 500 while scrapes are set to fail);
- ``PUT /nodes/<node>`` (body: the GPU count, optional): serve the node, every GPU healthy;
- ``PUT /nodes/<node>/gpus/<gpu>/<metric>`` (body: the value): set one series;
- ``DELETE /nodes/<node>``: serve none of its series (no data, as when its exporter pod is gone);
- ``PUT /scrape`` (body: ``fail`` or ``ok``): make every scrape fail, or answer again.

``GpuExporter`` is the server with those operations as methods; ``ExporterClient`` does the same
over HTTP from another process (the ``cluster up`` user's shell). It must not know about
Prometheus or the rollout: it only serves what it is told.
"""

from __future__ import annotations

import math
import re
import threading
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal, TypeVar

from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port

XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
UNCORRECTABLE_REMAPPED_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
PCIE_REPLAY_COUNTER = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"

Kind = Literal["gauge", "counter"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class Counter:
    """One dcgm-exporter field as its default-counters.csv declares it."""

    kind: Kind
    help: str


# What a node serves for each GPU, as dcgm-exporter's default counters declare it.
HEALTH_COUNTERS: dict[str, Counter] = {
    XID_ERRORS: Counter("gauge", "Value of the last XID error encountered."),
    UNCORRECTABLE_REMAPPED_ROWS: Counter("counter", "Number of remapped rows for uncorrectable errors"),
    ROW_REMAP_FAILURE: Counter("gauge", "Whether remapping of rows has failed"),
    PCIE_REPLAY_COUNTER: Counter("counter", "Total number of PCIe retries."),
}
# The local fleet's nodes carry eight GPUs (``nvidia.com/gpu.count``).
GPUS_PER_NODE = 8
DEFAULT_MODEL = "NVIDIA H100 80GB HBM3"
DRIVER_VERSION = "570.133.20"
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# The body of PUT /scrape.
SCRAPE_FAIL = "fail"
SCRAPE_OK = "ok"


def gpu_labels(node: str, gpu: int, model: str) -> dict[str, str]:
    """dcgm-exporter's labels of one GPU, in its order; the UUID is stable per node and index."""
    return {
        "gpu": str(gpu),
        "UUID": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{gpu}.{node}')}",
        "pci_bus_id": f"00000000:{0x18 + gpu * 0x10 & 0xFF:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": model,
        "Hostname": node,
        "DCGM_FI_DRIVER_VERSION": DRIVER_VERSION,
    }


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() else repr(value)


@dataclass
class _Node:
    gpus: int
    model: str
    values: dict[tuple[int, str], float] = field(default_factory=dict)


@dataclass
class GpuExporter(Launcher):
    """The exporter, serving on loopback while started. Use as a context manager."""

    model: str = DEFAULT_MODEL
    """``modelName`` of the GPUs of a node added without one."""
    port: int = 0
    """0: a free loopback port."""
    scrapes: int = field(init=False, default=0)
    """How many ``/metrics`` requests it answered (successfully or not)."""
    _nodes: dict[str, _Node] = field(init=False, default_factory=dict)
    _failing: bool = field(init=False, default=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = field(init=False, default=None)
    _thread: threading.Thread | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.port == 0:
            self.port = free_port()

    @property
    def address(self) -> str:
        """host:port, what Prometheus scrapes."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    # ----- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        self._server = ThreadingHTTPServer((LOOPBACK, self.port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="gpu-exporter", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    # ----- what a test does ------------------------------------------------------------------
    def add_node(self, node: str, gpus: int = GPUS_PER_NODE, model: str | None = None) -> None:
        """Serve ``node`` with ``gpus`` healthy GPUs (every health series 0); a node served already
        keeps the values set on it."""
        if gpus < 1:
            raise ValueError(f"gpus: a node has at least one GPU, not {gpus}")
        with self._lock:
            current = self._nodes.get(node)
            if current is None:
                self._nodes[node] = _Node(gpus, model or self.model)
            else:
                current.gpus = max(current.gpus, gpus)

    def set(self, node: str, metric: str, value: float, gpu: int = 0) -> None:
        """Set one series of ``node``'s GPU ``gpu`` (serving the node with eight GPUs, healthy
        otherwise, if it was not served)."""
        if not METRIC_NAME.fullmatch(metric):
            raise ValueError(f"metric: {metric!r} is not a Prometheus metric name")
        if gpu < 0:
            raise ValueError(f"gpu: an index from 0, not {gpu}")
        with self._lock:
            state = self._nodes.setdefault(node, _Node(max(GPUS_PER_NODE, gpu + 1), self.model))
            state.gpus = max(state.gpus, gpu + 1)
            state.values[(gpu, metric)] = float(value)

    def drop(self, node: str) -> None:
        """Serve no series of ``node`` (no data) until it is added or set again."""
        with self._lock:
            self._nodes.pop(node, None)

    def fail_scrapes(self, fail: bool = True) -> None:
        """Answer every scrape with HTTP 500 (``up`` is 0 and the series go stale), or answer again."""
        with self._lock:
            self._failing = fail

    @property
    def nodes(self) -> list[str]:
        with self._lock:
            return sorted(self._nodes)

    # ----- serving ---------------------------------------------------------------------------
    def scrape(self) -> str | None:
        """The exposition text a scrape gets now; None while scrapes fail."""
        with self._lock:
            self.scrapes += 1
            if self._failing:
                return None
            families: dict[str, list[str]] = {name: [] for name in HEALTH_COUNTERS}
            for node, state in sorted(self._nodes.items()):
                for gpu in range(state.gpus):
                    labels = gpu_labels(node, gpu, state.model)
                    text = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
                    set_here = {m for (g, m) in state.values if g == gpu}
                    for metric in sorted(HEALTH_COUNTERS.keys() | set_here):
                        value = state.values.get((gpu, metric), 0.0)
                        families.setdefault(metric, []).append(f"{metric}{{{text}}} {_number(value)}")
        lines: list[str] = []
        for metric, samples in families.items():
            counter = HEALTH_COUNTERS.get(metric, Counter("gauge", f"{metric} (set by a test)."))
            lines += [f"# HELP {metric} {counter.help}", f"# TYPE {metric} {counter.kind}", *samples]
        return "\n".join(lines) + "\n"


def _parsed(kind: Callable[[str], _T], name: str, text: str) -> _T:
    """``kind(text)``; a ValueError names ``name``."""
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a number") from None


def _handler(exporter: GpuExporter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            """Quiet: Prometheus scrapes every second."""

        def _answer(self, status: HTTPStatus, body: str = "", content_type: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> str:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length).decode().strip() if length else ""

        def _parts(self) -> list[str]:
            return [part for part in self.path.split("?", 1)[0].split("/") if part]

        def do_GET(self) -> None:
            if self._parts() != ["metrics"]:
                self._answer(HTTPStatus.NOT_FOUND, "not found: GET /metrics\n")
                return
            text = exporter.scrape()
            if text is None:
                self._answer(HTTPStatus.INTERNAL_SERVER_ERROR, "scrapes are set to fail (PUT /scrape ok)\n")
                return
            self._answer(HTTPStatus.OK, text, "text/plain; version=0.0.4; charset=utf-8")

        def do_PUT(self) -> None:
            parts, body = self._parts(), self._body()
            try:
                match parts:
                    case ["scrape"] if body in (SCRAPE_FAIL, SCRAPE_OK):
                        exporter.fail_scrapes(body == SCRAPE_FAIL)
                    case ["nodes", node]:
                        exporter.add_node(node, _parsed(int, "gpus", body) if body else GPUS_PER_NODE)
                    case ["nodes", node, "gpus", gpu, metric]:
                        value = _parsed(float, "value", body)
                        exporter.set(node, metric, value, gpu=_parsed(int, "gpu", gpu))
                    case _:
                        self._answer(HTTPStatus.NOT_FOUND, f"unknown: PUT {self.path} {body!r}\n")
                        return
            except ValueError as error:
                self._answer(HTTPStatus.BAD_REQUEST, f"{error}\n")
                return
            self._answer(HTTPStatus.OK, "ok\n")

        def do_DELETE(self) -> None:
            match self._parts():
                case ["nodes", node]:
                    exporter.drop(node)
                    self._answer(HTTPStatus.OK, "ok\n")
                case _:
                    self._answer(HTTPStatus.NOT_FOUND, f"unknown: DELETE {self.path}\n")

    return Handler


@dataclass(frozen=True)
class ExporterClient:
    """``GpuExporter``'s operations over its HTTP control API, from another process."""

    url: str

    def _call(self, method: str, path: str, body: str = "") -> None:
        request = urllib.request.Request(f"{self.url}{path}", data=body.encode(), method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def add_node(self, node: str, gpus: int = GPUS_PER_NODE) -> None:
        self._call("PUT", f"/nodes/{node}", str(gpus))

    def set(self, node: str, metric: str, value: float, gpu: int = 0) -> None:
        self._call("PUT", f"/nodes/{node}/gpus/{gpu}/{metric}", repr(float(value)))

    def drop(self, node: str) -> None:
        self._call("DELETE", f"/nodes/{node}")

    def fail_scrapes(self, fail: bool = True) -> None:
        self._call("PUT", "/scrape", SCRAPE_FAIL if fail else SCRAPE_OK)
