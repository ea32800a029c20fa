"""The Temporal client of every fleetwright process and of the CLI: pydantic payloads, and mutual
TLS and an API key when the settings name them.

Kept apart from the worker (``fleetwright.worker.temporal``) so a CLI command that only talks to
Temporal does not import the workflows, the activities and the tracing the worker hosts.
"""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import TLSConfig

from fleetwright.worker.settings import WorkerSettings


async def connect(
    address: str, namespace: str = "default", *, tls: TLSConfig | None = None, api_key: str | None = None
) -> Client:
    return await Client.connect(
        address,
        namespace=namespace,
        data_converter=pydantic_data_converter,
        tls=tls or False,
        api_key=api_key,
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
