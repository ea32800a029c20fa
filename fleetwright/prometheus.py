"""The Prometheus adapter: instant queries (``/api/v1/query``) against the one Prometheus server
the worker's settings name (``PrometheusAccess``), with its bearer token or basic-auth password
read from files (a mounted Secret's keys, read again at every query so a rotated Secret takes
effect) and an optional CA bundle.

Owns those HTTP calls and the decoded answer; it judges nothing (``planner.health.analysis`` does). A
Prometheus that cannot be reached or answers 5xx is ``PrometheusUnavailableError``; one that
refuses the credentials or sends no JSON is ``QueryRejectedError``. Credentials are sent, never
logged or put in an error.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

import urllib3
from pydantic import Field

from fleetwright.errors import PrometheusUnavailableError, QueryRejectedError
from fleetwright.planner.base import Frozen


class PrometheusAccess(Frozen):
    """Where the health checks' Prometheus is and how to authenticate (the worker's settings)."""

    url: str = ""
    bearer_token_file: str = ""
    basic_auth_user: str = ""
    basic_auth_password_file: str = ""
    ca_file: str = ""
    timeout_seconds: float = Field(default=10.0, gt=0)


QUERY_PATH = "/api/v1/query"


class Prometheus:
    """Instant queries against one Prometheus server with the configured auth and CA bundle."""

    def __init__(self, access: PrometheusAccess) -> None:
        self.access = access
        self._pool: urllib3.PoolManager | None = None

    def query(self, promql: str) -> Any:
        """The decoded JSON answer; PrometheusUnavailableError or QueryRejectedError."""
        if not self.access.url:
            raise PrometheusUnavailableError(
                "no Prometheus address is configured (setting prometheus_url)",
                reason="PrometheusNotConfigured",
            )
        url = self.access.url.rstrip("/") + QUERY_PATH + "?" + urlencode({"query": promql})
        try:
            response = self._manager().request(
                "GET", url, headers=self._headers(), timeout=self.access.timeout_seconds, retries=False
            )
        except urllib3.exceptions.HTTPError as exc:
            raise PrometheusUnavailableError(
                f"Prometheus at {self.access.url} unreachable: {type(exc).__name__}"
            ) from None
        if response.status >= 500:
            raise PrometheusUnavailableError(f"Prometheus answered HTTP {response.status}")
        if response.status in (401, 403):
            raise QueryRejectedError(f"Prometheus refused the credentials (HTTP {response.status})")
        try:
            return json.loads(response.data)
        except ValueError:
            raise QueryRejectedError(f"Prometheus answered HTTP {response.status} with no JSON") from None

    def _manager(self) -> urllib3.PoolManager:
        if self._pool is None:
            ca = self.access.ca_file
            self._pool = urllib3.PoolManager(ca_certs=ca) if ca else urllib3.PoolManager()
        return self._pool

    def _headers(self) -> dict[str, str]:
        access = self.access
        if access.bearer_token_file:
            token = _secret(access.bearer_token_file)
            return {"Authorization": f"Bearer {token}"}
        if access.basic_auth_user:
            password = _secret(access.basic_auth_password_file) if access.basic_auth_password_file else ""
            pair = base64.b64encode(f"{access.basic_auth_user}:{password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {}


def _secret(path: str) -> str:
    """A credential file's content (a mounted Secret's key), read at every query so a rotated
    Secret takes effect; its content never reaches an error message."""
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise QueryRejectedError(
            f"cannot read the Prometheus credential file {path}: {exc.strerror}"
        ) from None


class Querier(Protocol):
    def query(self, promql: str) -> Any: ...
