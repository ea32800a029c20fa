"""The health checks' Prometheus client (``activities.health``) against a real Prometheus that
serves TLS from the local CA and requires basic auth (its web config): the right credentials
measure; a wrong password, no credentials or a server the CA bundle does not trust are each an
Error measurement naming the cause, and no credential shows in a measurement or a log line.

Prometheus' web config knows basic auth only (a bearer token is what a proxy in front of it
checks), so the bearer token is proven against a loopback server that answers like Prometheus
only when the ``Authorization`` header carries the token in the file, read again at every query
so a rotated Secret takes effect."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bcrypt
import pytest

from fleetwright.activities.health import measure
from fleetwright.activities.payloads import MeasureRequest
from fleetwright.api.health import MetricCheck
from fleetwright.local.loopback import LOOPBACK
from fleetwright.local.pki import LocalCA
from fleetwright.local.prometheus import LocalPrometheus, WebAccess
from fleetwright.planner.health.analysis import CheckPhase, Measurement
from fleetwright.prometheus import Prometheus, PrometheusAccess

pytestmark = pytest.mark.integration

USER = "fleetwright"
PASSWORD = "pw-a7c4e19b52d8"
CHECK = MetricCheck.model_validate(
    {"name": "answers", "query": "vector(7)", "successCondition": "result[0] == 7"}
)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPrometheus]:
    work = tmp_path_factory.mktemp("prometheus-access")
    ca = LocalCA(work / "pki")
    serving = ca.issue("prometheus", common_name=LOOPBACK, ip_addresses=(LOOPBACK,), server=True)
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = WebAccess(serving.cert, serving.key, ca.cert_path, USER, PASSWORD, hashed)
    with LocalPrometheus(workdir=work / "server", web=web) as server:
        yield server


def measured(
    server: LocalPrometheus, tmp_path: Path, *, password: str | None, ca: bool = True
) -> Measurement:
    secret = tmp_path / "password"
    secret.write_text(password or "")
    assert server.web is not None
    access = PrometheusAccess(
        url=server.url,
        basic_auth_user=USER if password is not None else "",
        basic_auth_password_file=str(secret) if password is not None else "",
        ca_file=str(server.web.ca_file) if ca else "",
    )
    request = MeasureRequest(profile="access", node="node-1", check=CHECK)
    return measure(Prometheus(access), request)


def test_the_right_credentials_over_tls_measure(secured: LocalPrometheus, tmp_path: Path) -> None:
    result = measured(secured, tmp_path, password=PASSWORD)
    assert (result.phase, result.value) == (CheckPhase.SUCCESSFUL, [7.0]), result


@pytest.mark.parametrize(
    ("password", "ca", "cause"),
    [
        ("not-the-password", True, "Prometheus refused the credentials (HTTP 401)"),
        (None, True, "Prometheus refused the credentials (HTTP 401)"),
        (PASSWORD, False, "unreachable: SSLError"),
    ],
    ids=["wrong-password", "no-credentials", "untrusted-server"],
)
def test_a_refused_or_untrusted_access_is_an_error_naming_why_never_the_secret(
    secured: LocalPrometheus,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    password: str | None,
    ca: bool,
    cause: str,
) -> None:
    with caplog.at_level(logging.DEBUG):
        result = measured(secured, tmp_path, password=password, ca=ca)
    assert result.phase is CheckPhase.ERROR, result
    assert cause in result.message, result
    shown = result.model_dump_json() + caplog.text
    assert PASSWORD not in shown
    assert "not-the-password" not in shown


class BearerOnly(BaseHTTPRequestHandler):
    """Answers ``vector(7)`` like Prometheus to the bearer token in ``server.token``, 401 to others."""

    server: TokenServer

    def do_GET(self) -> None:
        allowed = self.headers.get("Authorization") == f"Bearer {self.server.token}"
        body = {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0, "7"]}]},
        }
        self.send_response(200 if allowed else 401)
        self.end_headers()
        self.wfile.write(json.dumps(body).encode() if allowed else b"Unauthorized")

    def log_message(self, format: str, *args: object) -> None:
        return


class TokenServer(ThreadingHTTPServer):
    token = "tok-3f9a6c"


@pytest.fixture
def bearer_server() -> Iterator[TokenServer]:
    server = TokenServer((LOOPBACK, 0), BearerOnly)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_bearer_token_is_read_at_every_query_and_never_shown(
    bearer_server: TokenServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TokenServer.token + "\n")
    port = bearer_server.server_address[1]
    access = PrometheusAccess(url=f"http://{LOOPBACK}:{port}", bearer_token_file=str(token_file))
    client = Prometheus(access)
    request = MeasureRequest(profile="access", node="node-1", check=CHECK)
    assert measure(client, request).phase is CheckPhase.SUCCESSFUL
    bearer_server.token = "tok-rotated-51b2"  # the Secret rotated: the old token is refused ...
    with caplog.at_level(logging.DEBUG):
        refused = measure(client, request)
    assert refused.phase is CheckPhase.ERROR
    assert "refused the credentials (HTTP 401)" in refused.message
    assert "tok-" not in refused.model_dump_json() + caplog.text
    token_file.write_text("tok-rotated-51b2")  # ... and the rotated file is read at the next query
    assert measure(client, request).phase is CheckPhase.SUCCESSFUL
