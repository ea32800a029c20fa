"""The process commands as the Helm chart runs them: ``fleetwright worker`` and ``fleetwright
controller`` as separate processes (settings from FLEETWRIGHT_SETTINGS and FLEETWRIGHT_* env),
driving a real rollout from ``kubectl apply``, and exiting 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleetwright import certs
from fleetwright.local.loopback import free_port
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.settings import WorkerSettings
from fleetwright.process.temporalclient import CORE_LOGGER
from tests.support.engine import unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import Rollout, engine_settings
from tests.support.waiting import until

pytestmark = pytest.mark.integration

FLEETWRIGHT = Path(sys.executable).with_name("fleetwright")


def process_env(settings_file: Path, **overrides: str) -> dict[str, str]:
    env = {**os.environ, "FLEETWRIGHT_SETTINGS": str(settings_file), "FLEETWRIGHT_LOG_FORMAT": "json"}
    env.update({f"FLEETWRIGHT_{k.upper()}": v for k, v in overrides.items()})
    return env


def start(command: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([str(FLEETWRIGHT), command], env=env, stdout=out, stderr=subprocess.STDOUT)


def terminate(process: subprocess.Popen[bytes], log: Path) -> int:
    """SIGTERM, and the exit code once it stopped (killed after 30 s so no process outlives the test)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"{process.args!r} ignored SIGTERM:\n{log.read_text()[-3000:]}") from None


@pytest.fixture
def settings_file(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, crds: None, tmp_path: Path
) -> Path:
    """A settings file as the chart mounts it; the task queue comes from the environment."""
    settings = WorkerSettings(
        temporal_address=temporal_server.address,
        temporal_namespace=temporal_server.namespace,
        kubeconfig=cluster.kubeconfig,
        engine=engine_settings(),
    )
    path = tmp_path / "settings.json"
    path.write_text(settings.model_dump_json())
    return path


@dataclass
class Processes:
    """fleetwright processes started by a test; whatever is still running at teardown is killed."""

    env: dict[str, str]
    directory: Path
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    def start(self, name: str, command: str = "", **overrides: str) -> None:
        """Start ``fleetwright <command>`` (default: ``name``) as ``name``; ``overrides`` are more
        FLEETWRIGHT_* settings."""
        env = {**self.env, **{f"FLEETWRIGHT_{k.upper()}": v for k, v in overrides.items()}}
        self.running[name] = start(command or name, env, self.log(name))

    def stop(self, name: str) -> int:
        return terminate(self.running[name], self.log(name))

    def tails(self) -> str:
        return "\n".join(f"--- {n}:\n{self.log(n).read_text()[-3000:]}" for n in self.running)

    async def wait_ready(self, rollout: Rollout) -> None:
        """The rollout completes, or the failure shows what the processes logged."""
        try:
            await asyncio.to_thread(rollout.wait_ready, 120)
        except RuntimeError as error:
            raise AssertionError(f"{error}\n{self.tails()}") from error

    def kill_all(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture
def processes(settings_file: Path, tmp_path: Path) -> Iterator[Processes]:
    """Request before ``rollout``: the processes outlive the rollout's deletion (a profile's
    finalizer is released by its workflow)."""
    started = Processes(process_env(settings_file, task_queue=unique("serve")), tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


async def test_worker_and_controller_processes_roll_out_and_stop_on_sigterm(
    processes: Processes, rollout: Rollout
) -> None:
    for name in ("worker", "controller"):
        processes.start(name)
    await asyncio.to_thread(rollout.apply)
    await processes.wait_ready(rollout)
    status = await asyncio.to_thread(rollout.status)
    assert status["phase"] == "Complete"
    assert status["nodesComplete"] == 3
    await asyncio.to_thread(rollout.delete)  # the workflow releases the finalizer: needs both
    codes = {name: await asyncio.to_thread(processes.stop, name) for name in ("worker", "controller")}
    logs = {name: processes.log(name).read_text() for name in codes}
    assert codes == {"worker": 0, "controller": 0}, {n: text[-3000:] for n, text in logs.items()}
    # Logs are structured (JSON lines) and say the process stopped on the signal.
    for name, text in logs.items():
        records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        assert any(r["message"] == f"{name} stopped" for r in records), text[-3000:]


async def test_workflows_and_activities_in_two_worker_processes_roll_out(
    processes: Processes, rollout: Rollout, tmp_path: Path
) -> None:
    """The chart's ``workflowWorker``: one process polls for the workflows, one for the activities.
    The workflow process is given a kubeconfig that does not exist: it must never need one."""
    absent = tmp_path / "no-kubeconfig"
    processes.start("workflows", command="worker", worker_role="workflows", kubeconfig=str(absent))
    processes.start("activities", command="worker", worker_role="activities")
    processes.start("controller")
    await asyncio.to_thread(rollout.apply)
    await processes.wait_ready(rollout)
    status = await asyncio.to_thread(rollout.status)
    assert (status["phase"], status["nodesComplete"]) == ("Complete", 3)
    await asyncio.to_thread(rollout.delete)
    codes = {
        name: await asyncio.to_thread(processes.stop, name)
        for name in ("workflows", "activities", "controller")
    }
    assert codes == {"workflows": 0, "activities": 0, "controller": 0}, processes.tails()
    for role in ("workflows", "activities"):
        records = [
            json.loads(line) for line in processes.log(role).read_text().splitlines() if line.startswith("{")
        ]
        assert any(r["message"].endswith(f" for {role}") for r in records), processes.tails()


async def test_webhook_process_serves_https_and_stops_on_sigterm(
    processes: Processes, tmp_path: Path
) -> None:
    bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=["127.0.0.1"])
    paths = certs.write_bundle(bundle, tmp_path / "tls")
    port = free_port()
    processes.start(
        "webhook",
        webhook_host="127.0.0.1",
        webhook_port=str(port),
        webhook_cert_file=str(paths["tls.crt"]),
        webhook_key_file=str(paths["tls.key"]),
    )
    context = ssl.create_default_context(cafile=str(paths["ca.crt"]))

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    await until(healthy, 60, "the webhook's /healthz", interval=0.3, details=processes.tails)
    assert await asyncio.to_thread(processes.stop, "webhook") == 0, processes.tails()


async def test_the_sdk_cores_own_log_lines_come_out_in_the_process_format(tmp_path: Path) -> None:
    """The SDK core warns when it cannot reach Temporal (its retried polls and heartbeats, whichever
    comes first). Those lines go through Python logging, so a worker's log is JSON lines with no
    terminal colour codes in them."""
    with LocalTemporal(ui=False) as server:
        settings = WorkerSettings(
            temporal_address=server.address,
            temporal_namespace=server.namespace,
            worker_role="workflows",  # needs no cluster
            kubeconfig=tmp_path / "no-kubeconfig",
        )
        settings_file = tmp_path / "settings.json"
        settings_file.write_text(settings.model_dump_json())
        worker = Processes(process_env(settings_file, task_queue=unique("core-logs")), tmp_path)
        try:
            worker.start("worker")
            log = worker.log("worker")
            await until(lambda: "worker polling" in log.read_text(), 60, "polling", details=worker.tails)
            server.kill()

            def core_warnings() -> list[dict[str, str]]:
                lines = log.read_text().splitlines()
                records = [json.loads(line) for line in lines if line.startswith("{")]
                return [r for r in records if r["logger"] == CORE_LOGGER and r["level"] == "WARNING"]

            await until(core_warnings, 60, "the core's warnings about its retries", details=worker.tails)
            assert await asyncio.to_thread(worker.stop, "worker") == 0, worker.tails()
        finally:
            worker.kill_all()
    text = log.read_text()
    assert "\x1b[" not in text, text[-3000:]
    assert all(line.startswith("{") for line in text.splitlines()), text[-3000:]
    assert any("retried" in r["message"] for r in core_warnings()), text[-3000:]
