"""The Helm chart's values as a pydantic model, and the generator of the chart's derived files.

``helm/fleetwright/values.schema.json`` is generated from ``ChartValues`` (which embeds the
process's ``WorkerSettings`` whole, so a new setting reaches the chart without a copy; the embedded
Temporal's search attributes and dynamic configuration default to those of the local servers,
``workflows.search.REGISTRATION`` and ``local.temporalserver``), and the
chart's ``crds/`` come from the same generator as ``crds/`` (``fleetwright.api.crdgen``). Run
``python -m fleetwright.chart`` after changing either model; ``--check`` fails on drift.

It must not render templates (Helm does) nor talk to a cluster.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from fleetwright.api import crdgen
from fleetwright.api.validation import AdmissionPolicy
from fleetwright.images import spec as image_spec
from fleetwright.local.temporalserver import DEV_DYNAMIC_CONFIG, DEV_SQLITE_PRAGMAS
from fleetwright.process.settings import WorkerSettings
from fleetwright.workflows.search import REGISTRATION

CHART = Path(__file__).resolve().parent.parent / "helm" / "fleetwright"
SCHEMA_FILE = "values.schema.json"


class Values(BaseModel):
    """camelCase keys, as Helm values are conventionally written; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class Image(Values):
    repository: str = Field(default="ghcr.io/fleetwright/fleetwright", description="Image repository.")
    tag: str = Field(default="", description="Image tag; the chart's appVersion when empty.")
    digest: str = Field(
        default="", pattern=r"^(sha256:[0-9a-f]{64})?$", description="Pin by digest (wins over tag)."
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Workload(Values):
    """Where and how big the pods of one workload are."""

    resources: dict[str, dict[str, str]] = Field(
        default_factory=lambda: {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        },
        description="Container resources (requests/limits).",
    )
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    priority_class_name: str = Field(default="", description="PriorityClass of the pods; empty: none.")
    pod_annotations: dict[str, str] = Field(default_factory=dict)


class Component(Workload):
    """One Deployment (worker, controller or webhook)."""

    replicas: int = Field(default=2, ge=0, description="Pods; two or more survive a node drain.")


class WorkflowWorker(Component):
    """Workers that run only the workflows (``worker_role: workflows``); the worker Deployment then
    runs only the activities. Off: every worker runs both."""

    enabled: bool = Field(
        default=False,
        description="Run the rollout and node workflows in a Deployment of their own, so their "
        "workflow tasks never wait for an interpreter busy with the activities' Kubernetes calls.",
    )


class IssuerRef(Values):
    name: str = ""
    kind: Literal["Issuer", "ClusterIssuer"] = "Issuer"


class CertManager(Values):
    enabled: bool = Field(
        default=False,
        description="Issue the webhook certificate with cert-manager (its CA injector fills the "
        "caBundle). Off: the chart generates a CA and certificate and keeps them across upgrades.",
    )
    issuer_ref: IssuerRef = Field(
        default_factory=IssuerRef, description="Issuer to use; empty: a self-signed Issuer the chart creates."
    )


class Webhook(Component):
    enabled: bool = True
    failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail", description="Fail: nothing unvalidated is admitted while the webhook is down."
    )
    timeout_seconds: int = Field(default=10, ge=1, le=30)
    cert_validity_days: int = Field(default=3650, ge=1, description="Chart-generated certificate validity.")
    cert_manager: CertManager = Field(default_factory=CertManager)


class Disruption(Values):
    enabled: bool = True
    max_unavailable: int = Field(default=1, ge=1, description="Per Deployment, during voluntary disruptions.")


class SecretRef(Values):
    secret_name: str = Field(default="", description="Secret in the release namespace; empty: unused.")


class TemporalTls(SecretRef):
    """A kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt) for mTLS to Temporal."""

    server_name: str = Field(default="", description="TLS server name when it differs from the address host.")


class TemporalApiKey(SecretRef):
    key: str = Field(default="api-key", description="Key in the Secret holding the API key.")


SearchAttributeType = Literal["Keyword", "KeywordList", "Int", "Double", "Bool", "Datetime", "Text"]


class TemporalImage(Image):
    repository: str = Field(default=image_spec.TEMPORAL.repository, description="Image repository.")


class TemporalPersistence(Values):
    """The embedded Temporal's SQLite database: one file on a ReadWriteOnce volume."""

    storage_class_name: str = Field(
        default="", description="StorageClass of the database's claim; empty: the cluster's default."
    )
    size: str = Field(
        default="10Gi", pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti)$", description="Size of the claim."
    )
    existing_claim: str = Field(
        default="",
        description="A PersistentVolumeClaim to use instead of the chart's (not created, never deleted).",
    )
    keep_on_uninstall: bool = Field(
        default=True,
        description="helm uninstall keeps the chart's claim (helm.sh/resource-policy: keep), so a "
        "reinstall under the same name finds its rollouts' histories.",
    )


class TemporalUi(Values):
    enabled: bool = Field(default=True, description="Serve the Temporal Web UI from the same process.")
    port: int = Field(default=8233, ge=1, le=65535)


class TemporalNetworkPolicy(Values):
    enabled: bool = Field(
        default=True,
        description="A NetworkPolicy that lets only the release's pods reach the embedded Temporal (it "
        "has no TLS or authorization of its own); enforced where the cluster's network plugin "
        "enforces NetworkPolicies.",
    )


class EmbeddedTemporal(Workload):
    """The chart's own Temporal: ``temporal server start-dev`` (one process, SQLite on a volume), one
    replica. It runs when ``settings.temporal_address`` is empty; an address turns it off."""

    image: TemporalImage = Field(default_factory=TemporalImage)
    persistence: TemporalPersistence = Field(default_factory=TemporalPersistence)
    ui: TemporalUi = Field(default_factory=TemporalUi)
    network_policy: TemporalNetworkPolicy = Field(default_factory=TemporalNetworkPolicy)
    search_attributes: dict[str, SearchAttributeType] = Field(
        default_factory=lambda: {
            name: cast(SearchAttributeType, kind) for name, kind in REGISTRATION.items()
        },
        description="Registered in settings.temporal_namespace at every start: fleetwright's own.",
    )
    dynamic_config: dict[str, Any] = Field(
        default_factory=lambda: dict(DEV_DYNAMIC_CONFIG),
        description="--dynamic-config-value KEY=JSON for each entry (docs/install.md says why these).",
    )
    sqlite_pragmas: dict[str, str] = Field(
        default_factory=lambda: dict(DEV_SQLITE_PRAGMAS),
        description="--sqlite-pragma NAME=VALUE for each entry: WAL, synced at checkpoints.",
    )


class Temporal(Values):
    """How to reach Temporal. The address and namespace are settings.temporal_address and
    settings.temporal_namespace; with no address the chart runs its own (``embedded``). Secrets are
    mounted as files, never put in the settings ConfigMap."""

    tls: TemporalTls = Field(default_factory=TemporalTls)
    api_key: TemporalApiKey = Field(default_factory=TemporalApiKey)
    embedded: EmbeddedTemporal = Field(
        default_factory=lambda: EmbeddedTemporal(
            resources={"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
        )
    )


class HelmTest(Workload):
    """The ``helm test`` pods: the webhook denies an invalid NodeProfile, Temporal answers."""


class PrometheusCredentials(SecretRef):
    """A Secret with the credentials of the Prometheus the health checks query, mounted as files on
    the worker that runs the activities (never in the settings ConfigMap). The basic-auth user name
    is settings.prometheus_basic_auth_user."""

    token_key: str = Field(default="", description="Key holding a bearer token; empty: none.")
    password_key: str = Field(default="", description="Key holding the basic-auth password; empty: none.")
    ca_key: str = Field(default="", description="Key holding a PEM CA bundle; empty: the system's.")


class RegistryCredentials(SecretRef):
    """A Secret that image pinning (settings.engine.image_pinning) reads, mounted as files on the
    worker that runs the activities (never in the settings ConfigMap): a Docker config with
    credentials per registry host (a kubernetes.io/dockerconfigjson Secret, such as the nodes' pull
    secret) and a CA bundle of the registries."""

    auth_key: str = Field(
        default="", description="Key holding a Docker config JSON (.dockerconfigjson); empty: anonymous."
    )
    ca_key: str = Field(default="", description="Key holding a PEM CA bundle; empty: the system's.")


class PackageNamespace(Values):
    # Its name is the engine's setting (settings.engine.package_namespace), the one owner: the chart
    # makes that namespace, and its Role, where the worker runs the stage Jobs.
    create: bool = Field(
        default=True,
        description="Create settings.engine.package_namespace, labelled privileged for Pod Security "
        "(set false when it already exists). The worker has no right to create namespaces.",
    )


class ChartValues(Values):
    """Every value the chart accepts."""

    image: Image = Field(default_factory=Image)
    image_pull_secrets: list[dict[str, str]] = Field(default_factory=list)
    service_account_annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations on every ServiceAccount (e.g. cloud IAM)."
    )
    worker: Component = Field(default_factory=Component)
    workflow_worker: WorkflowWorker = Field(default_factory=WorkflowWorker)
    controller: Component = Field(default_factory=Component)
    webhook: Webhook = Field(default_factory=Webhook)
    pod_disruption_budget: Disruption = Field(default_factory=Disruption)
    package_namespace: PackageNamespace = Field(default_factory=PackageNamespace)
    temporal: Temporal = Field(default_factory=Temporal)
    helm_test: HelmTest = Field(
        default_factory=lambda: HelmTest(
            resources={"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
        )
    )
    prometheus: PrometheusCredentials = Field(default_factory=PrometheusCredentials)
    registry: RegistryCredentials = Field(default_factory=RegistryCredentials)
    admission: AdmissionPolicy = Field(
        default_factory=AdmissionPolicy, description="The webhook's image rules (snake_case keys)."
    )
    settings: WorkerSettings = Field(
        default_factory=WorkerSettings,
        description="The processes' settings file (FLEETWRIGHT_SETTINGS), snake_case as the model.",
    )


def values_schema() -> dict[str, Any]:
    schema = ChartValues.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def rendered_files() -> dict[str, str]:
    """Chart-relative path -> content of every generated chart file."""
    files = {SCHEMA_FILE: json.dumps(values_schema(), indent=2, sort_keys=True) + "\n"}
    files.update({f"crds/{name}": content for name, content in crdgen.rendered_files().items()})
    return files


def drift(chart: Path = CHART) -> list[str]:
    """A unified diff per generated file that differs from a fresh generation."""
    diffs = []
    for name, fresh in rendered_files().items():
        path = chart / name
        current = path.read_text() if path.exists() else ""
        if current != fresh:
            lines = difflib.unified_diff(
                current.splitlines(keepends=True), fresh.splitlines(keepends=True), str(path), "generated"
            )
            diffs.append("".join(lines))
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetwright.chart", description=__doc__)
    parser.add_argument("--chart", type=Path, default=CHART, help="chart directory")
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff if files differ")
    args = parser.parse_args(argv)
    if args.check:
        diffs = drift(args.chart)
        sys.stdout.write("".join(diffs))
        return 1 if diffs else 0
    for name, content in rendered_files().items():
        path = args.chart / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
