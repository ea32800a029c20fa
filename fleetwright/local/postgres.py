"""A throwaway PostgreSQL server (Debian's ``postgresql-15``) for the PostgreSQL-backed Temporal
server: a fresh cluster in a scratch data directory, one superuser with a generated password,
password authentication, listening on loopback only on a free port and on no Unix socket.

Owns creating, starting and stopping that database server; what goes into it (the Temporal
schemas) belongs to the Temporal launcher. PostgreSQL refuses to run as root, so a root caller runs
it as the Debian ``postgres`` account.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fleetwright.binaries import SETUP_HINT, MissingBinaryError
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.processes import RunAs, Supervised, wait_until

MAJOR = 15
BIN = Path(f"/usr/lib/postgresql/{MAJOR}/bin")
SUPERUSER = "temporal"
# Debian's account for the server: postgres will not run as root.
SERVICE_ACCOUNT = "postgres"


def postgres_binary(name: str) -> Path:
    path = BIN / name
    if not os.access(path, os.X_OK):
        raise MissingBinaryError(f"{name} not found at {path} (Debian postgresql-{MAJOR}): {SETUP_HINT}")
    return path


def service_account() -> RunAs | None:
    """Who runs the server: the Debian account when we are root, else the caller."""
    return RunAs(SERVICE_ACCOUNT) if os.geteuid() == 0 else None


@dataclass
class LocalPostgres:
    """One PostgreSQL cluster in ``workdir`` (which the service account must be able to reach)."""

    workdir: Path
    port: int = field(init=False)
    password: str = field(init=False, repr=False)
    process: Supervised = field(init=False)
    run_as: RunAs | None = field(init=False)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.password = secrets.token_urlsafe(18)
        self.run_as = service_account()
        self.process = Supervised(
            "postgres",
            [
                str(postgres_binary("postgres")),
                "-D",
                str(self.datadir),
                "-p",
                str(self.port),
                "-c",
                f"listen_addresses={LOOPBACK}",
                "-c",
                "unix_socket_directories=",
            ],
            self.workdir / "postgres.log",
            run_as=self.run_as,
        )

    @property
    def datadir(self) -> Path:
        return self.workdir / "data"

    @property
    def host(self) -> str:
        return LOOPBACK

    def start(self, timeout: float = 60.0) -> None:
        if self.process.running:
            return
        if not (self.datadir / "PG_VERSION").exists():
            self._initdb()
        self.process.start()
        wait_until(self._ready, timeout=timeout, what="PostgreSQL", alive=self.process.check_alive)

    def _initdb(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        secret = self.workdir / "initdb.pw"
        secret.write_text(self.password + "\n")
        secret.chmod(0o600)
        if self.run_as is not None:
            self.run_as.own(self.workdir)
            self.run_as.own(secret)
        try:
            result = subprocess.run(
                [
                    str(postgres_binary("initdb")),
                    "-D",
                    str(self.datadir),
                    f"--username={SUPERUSER}",
                    f"--pwfile={secret}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C",
                    # A scratch cluster: initdb's own flush of the template files is not needed.
                    "--no-sync",
                ],
                capture_output=True,
                text=True,
                cwd=self.workdir,
                timeout=120,
                check=False,
                **(self.run_as.popen_args if self.run_as else {}),
            )
        finally:
            secret.unlink(missing_ok=True)
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed in {self.datadir}:\n{result.stdout}{result.stderr}")

    def _ready(self) -> bool:
        result = subprocess.run(
            [str(postgres_binary("pg_isready")), "-q", "-h", self.host, "-p", str(self.port)],
            capture_output=True,
            timeout=10,
            check=False,
        )
        return result.returncode == 0

    def stop(self) -> None:
        """SIGTERM to the server's process group: its sessions end and the postmaster shuts down."""
        self.process.stop(timeout=30)
