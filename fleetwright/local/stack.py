"""``LocalStack``: everything a rollout needs, on loopback, in one work directory.

The local control plane (with kube-scheduler, so a Deployment's pods land on the simulated nodes),
the Temporal dev server with fleetwright's search attributes registered, the CRDs, the admission
webhook (``fleetwright webhook``, serving with a certificate of its own CA and registered with that
CA), the worker and the controller (``fleetwright worker`` and ``fleetwright controller``, the
processes the Helm chart deploys, reading one settings file), and the simulated kubelet that turns
a reboot stage into a new boot id, and the GPU exporter (dcgm-exporter-shaped series of every
simulated node's GPUs) with a Prometheus scraping it for metric checks, and a local OCI registry
(``ociregistry``) whose CA the worker trusts; with ``StackOptions.workloads``, the Kubeflow
training operator (``trainingoperator``) with its CRDs; with
``ClusterOptions.real_node``, also one real node (a real
kubelet, containerd and runc) whose stage pods mount its scratch host root. ``cluster up`` keeps it
running, the demo rolls an example out on it, the chaos suite kills and restarts its pieces.

Owns starting, stopping and restarting those pieces and saying where they are (addresses, the
environment file, logs). It must not decide what is rolled out (the callers apply manifests) nor
when to break what (``chaos``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from fleetwright import certs
from fleetwright.api.common import API_VERSION
from fleetwright.binaries import wheel_binary
from fleetwright.images.offline import repository
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.gpumetrics import GpuMetrics
from fleetwright.local.kubectl import KubectlRunner, create_package_namespace
from fleetwright.local.kubelet import watched_kubelet
from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.members import MemberClusters, cluster_names, prepare, register
from fleetwright.local.nodes import gpu_product, node_name, stage_pod_timing
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.local.processes import Supervised, wait_until
from fleetwright.local.realnode import engine_fields, linked_to_temporal
from fleetwright.local.temporalserver import LocalTemporal, TemporalServer
from fleetwright.local.trainingoperator import TrainingOperator
from fleetwright.process.settings import WorkerSettings, process_environment
from fleetwright.webhook.admission import webhook_configurations
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.search import REGISTRATION

# The repository's example manifests: what ``cluster up`` tells a new user to apply and what the
# demo rolls out.
# Each simulated package stage takes a second on a kwok node; a failed stage is not retried.
LOCAL_ENGINE = EngineSettings(
    observe_interval_seconds=3,
    ended_check_seconds=10,
    drain_poll_seconds=1.0,
    stage_backoff_limit=0,
    stage_pod_annotations=stage_pod_timing(1.0, ready_seconds=0.2),
)
# fleetwright's processes, as the Helm chart runs them (``fleetwright <role>``).
ROLES = ("webhook", "worker", "controller")
# A NodeProfile only the webhook rejects (its version is not semver): once a server-side dry run
# of it is refused naming the field, the webhook is registered and answering.
WEBHOOK_PROBE = json.dumps(
    {
        "apiVersion": API_VERSION,
        "kind": "NodeProfile",
        "metadata": {"name": "admission-probe"},
        "spec": {
            "nodeSelector": {"matchLabels": {"probe": "true"}},
            "packages": [{"name": "probe", "version": "1.2", "image": "ghcr.io/example/probe"}],
        },
    }
)
PROBE_FIELD = "spec.packages[0].version"


@dataclass(frozen=True)
class StackOptions:
    cluster: ClusterOptions = field(default_factory=lambda: ClusterOptions(nodes=24, scheduler=True))
    workdir: Path | None = None
    """Keep everything here (kept afterwards); a temporary directory, removed on stop, when None."""
    engine: EngineSettings = LOCAL_ENGINE
    ui: bool = True
    """The Temporal Web UI."""
    webhook: bool = True
    """Run and register the admission webhook."""
    gpu_metrics: bool = True
    """Run the GPU exporter (healthy series for every simulated node's GPUs) and a Prometheus
    scraping it every second, for metric checks to query."""
    registry: bool = True
    """Run a local OCI registry (docker-registry with TLS from its own CA) that the worker trusts:
    images pushed there (``skopeo copy``) can be rolled out with ``image_pinning``."""
    clusters: int = 1
    """Local control planes, each with its own simulated fleet (``cluster.nodes`` nodes): beyond
    one, the others are campaign members (``local.members``), and every one, this stack's own
    cluster included, is registered for campaigns as ``cluster-1`` ... ``cluster-N``."""
    workloads: bool = False
    """Run the Kubeflow training operator with its CRDs: PyTorchJobs (and TFJobs, MPIJobs, ...)
    get pods owned by their job, as on a real cluster."""


@dataclass
class LocalStack(Launcher):
    """A running (or startable) local stack. Use as a context manager."""

    options: StackOptions = field(default_factory=StackOptions)
    attached: tuple[LocalCluster, TemporalServer] | None = None
    """A running control plane and Temporal server to use (and leave running) instead of own ones."""
    workdir: Path = field(init=False)
    cluster: LocalCluster = field(init=False)
    temporal: TemporalServer = field(init=False)
    processes: dict[str, Supervised] = field(init=False, default_factory=dict)
    gpu_metrics: GpuMetrics | None = field(init=False, default=None)
    registry: LocalRegistry | None = field(init=False, default=None)
    training_operator: TrainingOperator | None = field(init=False, default=None)
    members: MemberClusters | None = field(init=False, default=None)
    _exit: contextlib.ExitStack = field(init=False, default_factory=contextlib.ExitStack)

    def __post_init__(self) -> None:
        self.workdir = self._work_directory(self.options.workdir, "fleetwright-stack-")
        if self.options.registry:
            self.registry = LocalRegistry(workdir=self.workdir / "registry")
        if self.attached is not None:
            self.cluster, self.temporal = self.attached
        else:
            temporal = LocalTemporal(
                search_attributes=REGISTRATION, workdir=self.workdir / "temporal", ui=self.options.ui
            )
            self.temporal = temporal
            # One directory for the control plane's and fleetwright's logs alike; a real node's
            # pods reach this Temporal server through the node's link.
            real_node = self.options.cluster.real_node
            if real_node is not None:
                real_node = linked_to_temporal(real_node, temporal.port)
            # A real node pulls its images from the stack's registry.
            self.cluster = LocalCluster(
                replace(self.options.cluster, workdir=self.workdir, real_node=real_node), self.registry
            )
        if self.options.gpu_metrics:
            self.gpu_metrics = GpuMetrics(workdir=self.workdir / "gpu-metrics", wait_first_scrape=False)
        if self.options.clusters > 1:
            self.members = MemberClusters(
                cluster_names(self.options.clusters)[1:], self.options.cluster, self.workdir / "members"
            )
        if self.options.workloads:
            self.training_operator = TrainingOperator(
                self.cluster.kubeconfig, self.cluster.kubectl, workdir=self.workdir / "training-operator"
            )
        self.settings_path = self.workdir / "settings.json"
        self.env_path = self.workdir / "env"
        self.webhook_port = free_port()
        # Settings from the stack's file only: the shell's FLEETWRIGHT_* variables (another stack's
        # env file sourced in it) must not send these processes to another Temporal or cluster.
        env = process_environment(self.settings_path)
        command = [sys.executable, "-m", "fleetwright.cli.main"]
        roles = ROLES if self.options.webhook else tuple(r for r in ROLES if r != "webhook")
        for role in roles:
            self.processes[role] = Supervised(role, [*command, role], self.log_dir / f"{role}.log", env)

    @property
    def ui_url(self) -> str | None:
        """The Temporal Web UI, if this stack's server has one."""
        if isinstance(self.temporal, LocalTemporal) and self.temporal.ui:
            return self.temporal.ui_url
        return None

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def worker(self) -> Supervised:
        return self.processes["worker"]

    @property
    def controller(self) -> Supervised:
        return self.processes["controller"]

    # ----- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        # First: Prometheus's first scrape comes about 5 s after it starts, while the rest starts.
        if self.gpu_metrics is not None:
            self._start_gpu_metrics(self.gpu_metrics)
        if self.registry is not None:
            self._exit.callback(self.registry.stop)
            self.registry.start()
        if self.attached is None:
            self.cluster.start()
            self._exit.callback(self.cluster.stop)
            if self.cluster.real_node is not None:
                self.cluster.real_node.watch_reboots()
            self.temporal.start()
            self._exit.callback(self.temporal.stop)
        self._write_settings(self.options.engine)
        self._write_env()
        namespace = self.options.engine.package_namespace
        prepare(self.cluster.kubectl, namespace)
        if self.members is not None:
            register(self.cluster.kubectl, namespace, cluster_names(1)[0], self.cluster.kubeconfig)
            self._exit.callback(self.members.stop)
            self.members.start(self.cluster.kubectl, namespace)
        if self.options.webhook:
            self._start_webhook()
        if self.training_operator is not None:
            self._exit.callback(self.training_operator.stop)
            self.training_operator.start()
        self._exit.enter_context(watched_kubelet(self.cluster.kubeconfig, self.cluster.kubectl))
        for role in ("worker", "controller"):
            self.processes[role].start()
            self._exit.callback(self.processes[role].stop)
        if self.gpu_metrics is not None:
            self.gpu_metrics.wait_scraping()

    def _stop(self) -> None:
        self._exit.close()

    def _start_gpu_metrics(self, metrics: GpuMetrics) -> None:
        """The exporter serves every simulated node's eight GPUs, healthy, with its product."""
        self._exit.callback(metrics.stop)
        if self.attached is None:
            for index in range(self.options.cluster.nodes):
                metrics.exporter.add_node(node_name(index), model=gpu_product(index).replace("-", " "))
        metrics.start()

    def configure(self, engine: EngineSettings) -> None:
        """Engine settings for the next rollouts: the controller hands them to new workflows, so it
        restarts (gracefully) to read them."""
        self._write_settings(engine)
        create_package_namespace(self.cluster.kubectl, engine.package_namespace)
        self.controller.stop()
        self.controller.start()

    def check_alive(self) -> None:
        """Fail naming the piece (and its log tail) that exited on its own."""
        for process in self.supervised():
            if process.process is not None:
                process.check_alive()

    # ----- configuration ---------------------------------------------------------------------
    def settings(self, engine: EngineSettings) -> WorkerSettings:
        tls = self.workdir / "webhook-tls"
        return WorkerSettings(
            temporal_address=self.temporal.address,
            temporal_namespace=self.temporal.namespace,
            kubeconfig=self.cluster.kubeconfig,
            engine=self._on_nodes(engine),
            # Log files for a human to read.
            log_format="text",
            webhook_host=LOOPBACK,
            webhook_port=self.webhook_port,
            webhook_cert_file=tls / "tls.crt",
            webhook_key_file=tls / "tls.key",
            # The health checks of a health-gated rollout query the stack's own Prometheus.
            prometheus_url=self.gpu_metrics.url if self.gpu_metrics is not None else "",
            # Image pinning resolves the tags of images pushed to the stack's own registry.
            registry_ca_file=str(self.registry.ca_file) if self.registry is not None else "",
        )

    def _on_nodes(self, engine: EngineSettings) -> EngineSettings:
        """A real node's stage pods mount its scratch host root, never this machine's ``/``, and
        run the agent image this checkout built, by its digest in the registry."""
        node = self.cluster.real_node
        if node is None:
            return engine
        return engine.model_copy(update=engine_fields(node))

    def _write_settings(self, engine: EngineSettings) -> None:
        self.settings_path.write_text(json.dumps(self.settings(engine).model_dump(mode="json"), indent=2))

    def _write_env(self) -> None:
        """A file a shell can source to reach this stack with kubectl and fleetwright."""
        tools = wheel_binary("kubectl").parent
        lines = [
            f"export KUBECONFIG={shlex.quote(str(self.cluster.kubeconfig))}",
            f"export FLEETWRIGHT_TEMPORAL_ADDRESS={self.temporal.address}",
            f"export FLEETWRIGHT_TEMPORAL_NAMESPACE={self.temporal.namespace}",
            f'export PATH={shlex.quote(str(tools))}:"$PATH"',
        ]
        if self.gpu_metrics is not None:
            lines += [
                f"export PROMETHEUS_URL={self.gpu_metrics.url}",
                f"export GPU_EXPORTER_URL={self.gpu_metrics.exporter.url}",
            ]
        if self.registry is not None:
            lines += [
                f"export REGISTRY={self.registry.host}",
                f"export REGISTRY_CA_FILE={shlex.quote(str(self.registry.ca_file))}",
            ]
        self.env_path.write_text("\n".join(lines) + "\n")

    def _start_webhook(self) -> None:
        """Serve with a certificate from a CA of its own and register both webhooks with that CA."""
        bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=[LOOPBACK])
        certs.write_bundle(bundle, self.workdir / "webhook-tls")
        webhook = self.processes["webhook"]
        webhook.start()
        self._exit.callback(webhook.stop)
        base_url = f"https://{LOOPBACK}:{self.webhook_port}"
        for config in webhook_configurations(ca_bundle=bundle.ca_bundle, base_url=base_url):
            self.cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
        wait_for_webhook(self.cluster.kubectl, alive=webhook.check_alive)

    # ----- where things are ------------------------------------------------------------------
    def logs(self) -> dict[str, Path]:
        """Every process's log file, by name."""
        return {piece.name: piece.log_path for piece in self.supervised()}

    def supervised(self) -> list[Supervised]:
        """Every child process of the stack."""
        pieces = [*self.cluster.components.values(), self.temporal.process, *self.processes.values()]
        if self.gpu_metrics is not None:
            pieces.append(self.gpu_metrics.prometheus.process)
        if self.registry is not None:
            pieces.append(self.registry.process)
        if self.training_operator is not None:
            pieces.append(self.training_operator.process)
        return pieces


def examples_dir() -> Path:
    """The checkout's example manifests (a DeploymentPolicy, a NodeProfile, a training workload)."""
    return repository() / "examples"


def example_documents(examples: Path, kind: str) -> list[dict[str, Any]]:
    """The documents of ``kind`` in a directory of example manifests, in file order."""
    found = []
    for path in sorted(examples.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                found.append(doc)
    return found


def example_profiles(examples: Path | None = None) -> list[str]:
    """The NodeProfiles the example manifests create, by name."""
    return [
        str(doc["metadata"]["name"]) for doc in example_documents(examples or examples_dir(), "NodeProfile")
    ]


def wait_for_webhook(
    kubectl: KubectlRunner, *, timeout: float = 60.0, alive: Callable[[], None] | None = None
) -> None:
    """Until the apiserver calls the registered webhook (a server-side dry run of ``WEBHOOK_PROBE``
    is refused naming its version field)."""

    def in_effect() -> bool:
        done = kubectl("apply", "--dry-run=server", "-f", "-", input=WEBHOOK_PROBE, check=False)
        return done.returncode != 0 and PROBE_FIELD in done.stderr

    wait_until(in_effect, timeout=timeout, what="the admission webhook to answer", interval=0.5, alive=alive)
