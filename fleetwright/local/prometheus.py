"""A local Prometheus server (Debian's ``prometheus`` package, installed by ``tools/setup.sh``) on
loopback, scraping the targets it is given every second into a scratch TSDB: what the metric
checks of a health-gated rollout query in the local stack and in the tests.

Owns writing its configuration (and, when given ``WebAccess``, the web config that makes it serve
TLS and require basic auth), starting, killing and stopping it, and the instant query the tests
and the benchmarks read values with. What it scrapes is the caller's (the local stack hands it the
GPU exporter, ``gpuexporter``).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwright.binaries import SETUP_HINT, MissingBinaryError
from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.processes import Supervised, wait_until

BINARY = Path("/usr/bin/prometheus")
# Every second: a metric that turns bad is seen by a query within about a second (a scrape's
# timeout must not exceed its interval).
SCRAPE_INTERVAL_SECONDS = 1
START_TIMEOUT = 60.0
# A scratch store: a day is more than any test or local rollout runs.
RETENTION = "1d"


def prometheus_binary() -> Path:
    if not os.access(BINARY, os.X_OK):
        raise MissingBinaryError(f"prometheus not found at {BINARY} (Debian prometheus): {SETUP_HINT}")
    return BINARY


class QueryError(RuntimeError):
    """Prometheus answered a query with an error (a bad expression, an overloaded server)."""


@dataclass(frozen=True)
class ScrapeJob:
    """One scrape job: its ``job`` label and the host:port targets it scrapes."""

    name: str
    targets: tuple[str, ...]
    metrics_path: str = "/metrics"


@dataclass(frozen=True)
class WebAccess:
    """What Prometheus' web config requires of a client: TLS with ``cert``/``key`` (signed by the CA
    at ``ca_file``, which clients verify against) and basic auth of ``user`` with ``password_hash``
    (bcrypt). ``password`` is what this module's own reads send."""

    cert: Path
    key: Path
    ca_file: Path
    user: str
    password: str
    password_hash: str

    def web_config(self) -> dict[str, Any]:
        return {
            "tls_server_config": {"cert_file": str(self.cert), "key_file": str(self.key)},
            "basic_auth_users": {self.user: self.password_hash},
        }


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector."""

    labels: dict[str, str]
    value: float


@dataclass
class LocalPrometheus(Launcher):
    """A running (or startable) Prometheus. Use as a context manager."""

    jobs: tuple[ScrapeJob, ...] = ()
    workdir: Path | None = None
    scrape_interval_seconds: int = SCRAPE_INTERVAL_SECONDS
    web: WebAccess | None = None
    """TLS and basic auth required of every client; None serves plain HTTP to anyone."""
    port: int = field(init=False)
    process: Supervised = field(init=False)
    """The server itself (what a test kills to make Prometheus unreachable)."""

    def __post_init__(self) -> None:
        self.workdir = self._work_directory(self.workdir, "fleetwright-prometheus-")
        self.port = free_port()
        argv = [
            str(prometheus_binary()),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--storage.tsdb.retention.time={RETENTION}",
            f"--web.listen-address={self.address}",
            "--log.level=warn",
        ]
        if self.web is not None:
            argv.append(f"--web.config.file={self.workdir / 'web.yml'}")
        self.process = Supervised("prometheus", argv, self.workdir / "prometheus.log")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        """The base URL a client (and a metric check's settings) names."""
        return f"{'https' if self.web is not None else 'http'}://{self.address}"

    @property
    def config_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "prometheus.yml"

    def config(self) -> dict[str, Any]:
        interval = f"{self.scrape_interval_seconds}s"
        return {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "evaluation_interval": interval,
            },
            "scrape_configs": [
                {
                    "job_name": job.name,
                    "metrics_path": job.metrics_path,
                    "static_configs": [{"targets": list(job.targets)}],
                }
                for job in self.jobs
            ],
        }

    # ----- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        if self.web is not None:
            assert self.workdir is not None
            (self.workdir / "web.yml").write_text(yaml.safe_dump(self.web.web_config(), sort_keys=False))
        self.process.start()
        wait_until(
            self.ready,
            timeout=START_TIMEOUT,
            what="Prometheus",
            alive=self.process.check_alive,
            interval=0.05,
        )

    def _stop(self) -> None:
        self.process.stop()

    def kill(self) -> None:
        """SIGKILL the server (its TSDB stays), as a crash would; ``start`` brings it back."""
        self.process.kill()

    def ready(self) -> bool:
        try:
            with self._open(f"{self.url}/-/ready", timeout=5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def _open(self, url: str, timeout: float) -> Any:
        """``urlopen`` with the TLS trust and credentials ``web`` requires."""
        if self.web is None:
            return urllib.request.urlopen(url, timeout=timeout)
        pair = base64.b64encode(f"{self.web.user}:{self.web.password}".encode()).decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {pair}"})
        context = ssl.create_default_context(cafile=str(self.web.ca_file))
        return urllib.request.urlopen(request, timeout=timeout, context=context)

    # ----- reading ---------------------------------------------------------------------------
    def _api(self, path: str, params: dict[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with self._open(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as error:
            answer = json.loads(error.read() or b"{}")
        if answer.get("status") != "success":
            raise QueryError(f"{path} {params or ''}: {answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query(self, promql: str) -> list[Sample]:
        """An instant query that must give a vector (an empty one when there is no data); a
        ``QueryError`` when Prometheus refuses it, ``urllib.error.URLError`` when it is down."""
        data = self._api("query", {"query": promql})
        if data["resultType"] != "vector":
            raise QueryError(f"{promql!r} gives a {data['resultType']}, not an instant vector")
        return [Sample(item["metric"], float(item["value"][1])) for item in data["result"]]

    def version(self) -> str:
        return str(self._api("status/buildinfo")["version"])

    def targets_up(self, job: str) -> dict[str, bool]:
        """Each target of ``job`` by address, and whether its last scrape succeeded."""
        return {sample.labels["instance"]: sample.value == 1 for sample in self.query(f'up{{job="{job}"}}')}
