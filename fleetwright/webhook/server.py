"""The admission webhooks' HTTPS server (``WebhookServer``): stdlib ``http.server`` in a thread,
the TLS handshake in each handler's thread, the validating review on ``WEBHOOK_PATH``, the Node
mutation on ``MUTATE_PATH`` and a health check. Owns the HTTP side only; the answers are
``review``'s and ``nodetaint``'s.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fleetwright.api.validation import AdmissionPolicy
from fleetwright.webhook.nodetaint import mutate
from fleetwright.webhook.review import ResourceLookup, review

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/validate"
MUTATE_PATH = "/mutate-node"
HEALTH_PATH = "/healthz"
# The apiserver refuses larger request bodies anyway (3 MiB objects, twice for UPDATE).
_MAX_BODY = 8 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 15  # seconds a slow client may hold a handler thread

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s: " + format, self.address_string(), *args)

    def _send(self, status: HTTPStatus, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path == HEALTH_PATH:
            self._send(HTTPStatus.OK, b"ok", "text/plain")
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path not in (WEBHOOK_PATH, MUTATE_PATH):
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > _MAX_BODY:
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"bad content length", "text/plain")
            return
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(HTTPStatus.BAD_REQUEST, b"body is not JSON", "text/plain")
            return
        if path == MUTATE_PATH:
            answer = mutate(body, self.server.lookup)
        else:
            answer = review(body, self.server.lookup, self.server.admission)
        self._send(HTTPStatus.OK, json.dumps(answer).encode(), "application/json")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        lookup: ResourceLookup,
        context: ssl.SSLContext,
        admission: AdmissionPolicy | None,
    ) -> None:
        super().__init__(address, _Handler)
        self.lookup = lookup
        self.admission = admission
        # The TLS handshake happens in the handler thread (first read), so one slow client cannot
        # stall accept().
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Failed TLS handshakes and dropped connections are the client's problem; log, don't print.
        log.debug("webhook connection from %s failed", client_address, exc_info=True)


class WebhookServer:
    """The webhook's HTTPS endpoint in a background thread. Use as a context manager."""

    def __init__(
        self,
        lookup: ResourceLookup,
        *,
        cert_file: Path,
        key_file: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        admission: AdmissionPolicy | None = None,
    ) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(cert_file), str(key_file))
        self._host = host
        self._server = _Server((host, port), lookup, context, admission)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fleetwright-webhook", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://{self._host}:{self.port}{WEBHOOK_PATH}"

    @property
    def base_url(self) -> str:
        return f"https://{self._host}:{self.port}"

    def start(self) -> WebhookServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
