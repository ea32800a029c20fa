"""The Temporal client of every fleetwright process and of the CLI: pydantic payloads, mutual TLS
and an API key when the settings name them, and the one Temporal runtime they run on.

The runtime forwards the SDK core's own log lines (gRPC retries, poll failures) to Python logging,
so they come out in the process's format (JSON lines in a cluster) instead of core's coloured
console lines. Forwarding calls into Python from core's threads, which must not happen while the
interpreter finalizes: the processes end through ``fleetwright.process.shutdown.run_and_exit``,
which skips finalization.

Kept apart from the worker (``fleetwright.worker.temporalworker``) so a CLI command that only talks to
Temporal does not import the workflows, the activities and the tracing the worker hosts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import TLSConfig

from fleetwright.process.settings import WorkerSettings

# The SDK core's records: warnings of its own crates, errors of the libraries under it (as the
# SDK's default console logger filters them).
CORE_LOGGER = "temporalio.core"
_CORE_FILTER = TelemetryFilter(core_level="WARN", other_level="ERROR")
_runtime: Runtime | None = None


def install_runtime(
    metrics: PrometheusConfig | None = None, global_tags: Mapping[str, str] | None = None
) -> Runtime:
    """Make the process's Temporal runtime: core's logs forwarded to ``CORE_LOGGER``, and its
    metrics exported as ``metrics`` says. Call before the first ``connect``."""
    global _runtime  # noqa: PLW0603 - one runtime per process
    forwarding = LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER), append_target_to_name=False)
    telemetry = TelemetryConfig(
        logging=LoggingConfig(filter=_CORE_FILTER, forwarding=forwarding),
        metrics=metrics,
        global_tags=global_tags or {},
    )
    # Not made the SDK's default runtime: only the clients made here (and their workers) forward,
    # not every client or test environment that happens to share the process.
    _runtime = Runtime(telemetry=telemetry)
    return _runtime


def runtime() -> Runtime:
    """The process's runtime, made without metrics if nothing installed one."""
    return _runtime or install_runtime()


async def connect(
    address: str, namespace: str = "default", *, tls: TLSConfig | None = None, api_key: str | None = None
) -> Client:
    return await Client.connect(
        address,
        namespace=namespace,
        data_converter=pydantic_data_converter,
        tls=tls or False,
        api_key=api_key,
        runtime=runtime(),
    )


async def connect_with(settings: WorkerSettings) -> Client:
    """The processes' client: the address and namespace, plus mutual TLS and an API key when the
    settings name them (files mounted from Secrets, so no secret is in the settings themselves)."""
    return await connect(
        settings.temporal_address,
        settings.temporal_namespace,
        tls=_tls(settings),
        api_key=_read(settings.temporal_api_key_file, "temporal_api_key_file").decode().strip()
        if settings.temporal_api_key_file
        else None,
    )


def _tls(settings: WorkerSettings) -> TLSConfig | None:
    if settings.temporal_tls_dir is None:
        return None
    folder = settings.temporal_tls_dir
    ca = folder / "ca.crt"
    return TLSConfig(
        client_cert=_read(folder / "tls.crt", "temporal_tls_dir"),
        client_private_key=_read(folder / "tls.key", "temporal_tls_dir"),
        server_root_ca_cert=ca.read_bytes() if ca.exists() else None,
        domain=settings.temporal_tls_server_name or None,
    )


def _read(path: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ValueError(f"{field}: cannot read {path}: {error.strerror}") from error
