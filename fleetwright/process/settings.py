"""The fleetwright process's settings: one pydantic model, read from a JSON file (its path in
``FLEETWRIGHT_SETTINGS``) and ``FLEETWRIGHT_<FIELD>`` environment overrides. The Helm chart's
values schema and the settings reference (docs/settings.md, ``fleetwright worker --help``:
``worker.settingsdoc``) are generated from it.

Owns the shape, defaults and loading of the settings; it must not act on them (the process
commands in ``fleetwright.cli.serve`` and ``worker.main`` do)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleetwright.process.defaults import TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE
from fleetwright.prometheus import PrometheusAccess
from fleetwright.registry import RegistryAccess
from fleetwright.workflows.enginesettings import EngineSettings

SETTINGS_ENV = "FLEETWRIGHT_SETTINGS"
"""The path of the JSON settings file (not the JSON itself)."""
ENV_PREFIX = "FLEETWRIGHT_"

LogFormat = Literal["auto", "json", "text"]
TracesExporter = Literal["none", "console", "otlp"]
WorkerRole = Literal["all", "workflows", "activities"]


def process_environment(settings_file: Path, inherited: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process whose settings are ``settings_file`` and nothing else:
    ``inherited`` (this process's environment by default) without its ``FLEETWRIGHT_*`` variables,
    which would override the file's values (a shell that sourced a local stack's env file holds
    that stack's Temporal address), plus ``FLEETWRIGHT_SETTINGS`` naming the file."""
    source = os.environ if inherited is None else inherited
    kept = {key: value for key, value in source.items() if not key.startswith(ENV_PREFIX)}
    return {**kept, SETTINGS_ENV: str(settings_file)}


class WorkerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    temporal_address: str = Field(default=TEMPORAL_ADDRESS, description="Temporal frontend host:port.")
    temporal_namespace: str = Field(default=TEMPORAL_NAMESPACE, description="Temporal namespace.")
    task_queue: str = Field(default="fleetwright", description="Task queue of the workflows and activities.")
    temporal_tls_dir: Path | None = Field(
        default=None,
        description="Directory with the Temporal client certificate (tls.crt, tls.key) and optionally "
        "the server CA (ca.crt); mutual TLS when set.",
    )
    temporal_tls_server_name: str = Field(
        default="", description="Server name to verify in Temporal's certificate (default: from the address)."
    )
    temporal_api_key_file: Path | None = Field(
        default=None,
        description="File holding a Temporal Cloud API key (sent as a bearer token); never logged.",
    )
    kubeconfig: Path | None = Field(
        default=None, description="Kubeconfig path; in-cluster config when unset."
    )
    max_concurrent_activities: int = Field(default=200, ge=1, description="Activity slots (threads).")
    worker_role: WorkerRole = Field(
        default="all",
        description="What this worker process polls for: all (workflows and activities), workflows "
        "(the rollout and node workflows only) or activities (the Kubernetes activities only). Split "
        "them over two processes on the same task queue so workflow tasks never wait behind the "
        "activities' JSON decoding for one interpreter lock.",
    )
    engine: EngineSettings = Field(default_factory=EngineSettings, description="Rollout engine knobs.")
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of the Prometheus /metrics endpoint (fleetwright_* and Temporal SDK metrics); "
        "0 disables it.",
    )
    metrics_host: str = Field(
        default="0.0.0.0",  # noqa: S104 - Prometheus scrapes the pod IP
        description="Address the /metrics endpoint listens on.",
    )
    log_level: str = Field(default="INFO", description="Log level (DEBUG, INFO, WARNING, ERROR).")
    log_format: LogFormat = Field(
        default="auto",
        description="Log format: json (one object per line), text (readable), or auto (text on a "
        "terminal, JSON otherwise, e.g. in a cluster).",
    )
    traces_exporter: TracesExporter = Field(
        default="none",
        description="Where OpenTelemetry spans (workflows, activities, Kubernetes calls) go: none, "
        "console (stdout) or otlp (OTLP/HTTP to traces_otlp_endpoint).",
    )
    traces_otlp_endpoint: str = Field(
        default="http://127.0.0.1:4318/v1/traces",
        description="OTLP/HTTP traces endpoint of the collector, used when traces_exporter is otlp.",
    )
    webhook_host: str = Field(
        default="0.0.0.0",  # noqa: S104 - the apiserver reaches the webhook through its Service
        description="Address the admission webhook's HTTPS server listens on.",
    )
    webhook_port: int = Field(default=9443, ge=0, le=65535, description="Port of the admission webhook.")
    webhook_cert_file: Path = Field(
        default=Path("/etc/fleetwright/webhook/tls.crt"),
        description="PEM serving certificate of the admission webhook.",
    )
    webhook_key_file: Path = Field(
        default=Path("/etc/fleetwright/webhook/tls.key"),
        description="PEM private key of the admission webhook.",
    )

    prometheus_url: str = Field(
        default="",
        description="Base URL of the Prometheus the health checks query (its /api/v1/query), e.g. "
        "http://prometheus.monitoring.svc:9090. Empty: every measurement is an Error "
        "(PrometheusNotConfigured), so every gate with checks holds, named MonitoringUnavailable, "
        "rather than passes.",
    )
    prometheus_bearer_token_file: str = Field(
        default="",
        description="File holding a bearer token for Prometheus (a mounted Secret's key), read at each "
        "query; never logged.",
    )
    prometheus_basic_auth_user: str = Field(
        default="",
        description="User name for Prometheus basic auth (with prometheus_basic_auth_password_file).",
    )
    prometheus_basic_auth_password_file: str = Field(
        default="",
        description="File holding the basic-auth password (a mounted Secret's key), read at each query; "
        "never logged.",
    )
    prometheus_ca_file: str = Field(
        default="", description="PEM CA bundle that verifies Prometheus' certificate. Empty: the system's."
    )
    prometheus_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Timeout of one Prometheus query."
    )

    registry_ca_file: str = Field(
        default="", description="PEM CA bundle that verifies the image registries. Empty: the system's."
    )
    registry_auth_file: str = Field(
        default="",
        description="Docker config file (a mounted kubernetes.io/dockerconfigjson Secret's key) with "
        "credentials per registry host, read at each resolution; never logged. Empty: anonymous.",
    )
    registry_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Timeout of one registry call when resolving an image."
    )

    def registry_access(self) -> RegistryAccess:
        """How image resolution reaches the registries."""
        return RegistryAccess(
            ca_file=self.registry_ca_file,
            auth_file=self.registry_auth_file,
            timeout_seconds=self.registry_timeout_seconds,
        )

    def prometheus_access(self) -> PrometheusAccess:
        """Where the health checks' Prometheus is and how to authenticate."""
        return PrometheusAccess(
            url=self.prometheus_url,
            bearer_token_file=self.prometheus_bearer_token_file,
            basic_auth_user=self.prometheus_basic_auth_user,
            basic_auth_password_file=self.prometheus_basic_auth_password_file,
            ca_file=self.prometheus_ca_file,
            timeout_seconds=self.prometheus_timeout_seconds,
        )

    @field_validator("engine", mode="before")
    @classmethod
    def _known_engine_settings(cls, value: object) -> object:
        """The engine knobs travel in workflow payloads, which ignore unknown fields
        (``planner.base.Frozen``); written by an operator, an unknown one is a mistake."""
        if isinstance(value, Mapping):
            unknown = sorted(set(map(str, value)) - set(EngineSettings.model_fields))
            if unknown:
                raise ValueError(f"unknown engine setting(s): {', '.join(f'engine.{k}' for k in unknown)}")
        return value

    @classmethod
    def load(cls, path: Path | None = None) -> WorkerSettings:
        """From a JSON file (``path``, else the file ``FLEETWRIGHT_SETTINGS`` names), then
        ``FLEETWRIGHT_<FIELD>`` overrides for every top-level field except the nested ``engine``."""
        data: dict[str, object] = {}
        source = path or (Path(os.environ[SETTINGS_ENV]) if SETTINGS_ENV in os.environ else None)
        if source is not None:
            data.update(json.loads(source.read_text()))
        for field in cls.model_fields:
            value = os.environ.get(f"{ENV_PREFIX}{field.upper()}")
            if value and field != "engine":
                data[field] = value
        return cls.model_validate(data)
