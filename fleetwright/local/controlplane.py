"""The local control plane: real etcd, kube-apiserver and kube-controller-manager (and, when asked,
kube-scheduler), and kwok simulating N GPU nodes, all on loopback.

``LocalCluster`` owns a work directory (PKI, etcd data, logs, kubeconfigs) and the child
processes. Components can be killed and restarted one by one, which the chaos suite uses.
kwok and its Node objects are ``kwok``'s, created with kubectl (``kubectl``) so this module stays
out of the Kubernetes client.
"""

from __future__ import annotations

import base64
import copy
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwright.binaries import cache_dir, control_plane_binary
from fleetwright.images import offline
from fleetwright.images.offline import Built
from fleetwright.local.kubectl import run_kubectl
from fleetwright.local.kwok import KwokFleet
from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port, http_ok
from fleetwright.local.nodeconfig import SERVICE_CIDR
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.local.pki import CertPair, LocalCA, write_service_account_keys
from fleetwright.local.processes import Supervised, wait_until
from fleetwright.local.realnode import RealNode, RealNodeOptions

# Controllers the product relies on (Jobs, PDB status, owner GC, namespaces and service accounts
# for pods, node lifecycle) plus what Deployments/ReplicaSets/DaemonSets need for test workloads.
CONTROLLERS = (
    "job-controller",
    "disruption-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
    "statefulset-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "ttl-controller",
    "ttl-after-finished-controller",
    "pod-garbage-collector-controller",
    "root-ca-certificate-publisher-controller",
    # The apiserver puts protection finalizers on every claim and volume (the chart's embedded
    # Temporal has a claim): these lift them once no pod uses them, or a deleted claim and its
    # namespace stay Terminating.
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
)


DEFAULT_LEASE_SECONDS = 40
# How far a longer lease's node-monitor grace period reaches past the lease itself.
GRACE_PAST_LEASE_SECONDS = 60


def node_monitor_grace(lease_seconds: int) -> tuple[str, ...]:
    """The controller manager's flags for nodes whose leases last ``lease_seconds``: none at the
    default, a grace period past a longer lease."""
    if lease_seconds <= DEFAULT_LEASE_SECONDS:
        return ()
    return (f"--node-monitor-grace-period={lease_seconds + GRACE_PAST_LEASE_SECONDS}s",)


@dataclass(frozen=True)
class ClusterOptions:
    nodes: int = 0
    workdir: Path | None = None
    # Extra kube-apiserver flags, e.g. feature gates, as "--flag=value" strings.
    apiserver_args: tuple[str, ...] = ()
    # Extra kube-controller-manager flags, as "--flag=value" strings.
    controller_manager_args: tuple[str, ...] = ()
    # How long a simulated node's lease lasts (kwok renews it at a quarter of that, like a kubelet).
    # Thousands of simulated nodes renewing every 10 s cost the apiserver more than the rollout
    # does; a longer lease keeps a benchmark about fleetwright. A lease longer than the default
    # stretches the controller manager's node-monitor grace period past it (by
    # ``GRACE_PAST_LEASE_SECONDS``),
    # so nodes do not turn NotReady between renewals.
    node_lease_seconds: int = DEFAULT_LEASE_SECONDS
    startup_timeout: float = 120.0
    scheduler: bool = False
    """Also run kube-scheduler, so that pods without a node name (a Deployment's) are placed on the
    simulated nodes. Stage Jobs name their node and need none."""
    real_node: RealNodeOptions | None = None
    """Also run one real node (kubelet, containerd, runc) beside the kwok fleet, and the
    kube-scheduler so that Deployments land on it (see ``realnode``)."""
    images: tuple[Built, ...] | None = None
    """The image archives the real node pulls (pushed to the registry first); None: build (or find
    cached) this checkout's."""


def _kubeconfig(server: str, ca: Path, client: CertPair, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "fleetwright-local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(client.cert), "client-key": str(client.key)}}
        ],
        "contexts": [
            {"name": "fleetwright-local", "context": {"cluster": "fleetwright-local", "user": user}}
        ],
        "current-context": "fleetwright-local",
    }


def inline_kubeconfig(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its certificate and key files read into ``*-data`` fields: a kubeconfig
    that works where those files do not exist (a campaign's member Secret)."""
    inlined = copy.deepcopy(config)
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in inlined[section]:
            body = entry[key]
            for field_name in ("certificate-authority", "client-certificate", "client-key"):
                if field_name in body:
                    body[f"{field_name}-data"] = base64.b64encode(
                        Path(body.pop(field_name)).read_bytes()
                    ).decode()
    return inlined


@dataclass
class LocalCluster(Launcher):
    """A running (or startable) local control plane. Use as a context manager."""

    options: ClusterOptions = field(default_factory=ClusterOptions)
    workdir: Path = field(init=False)
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)
    ca_cert: Path = field(init=False)
    components: dict[str, Supervised] = field(init=False, default_factory=dict)
    real_node: RealNode | None = field(init=False, default=None)
    registry: LocalRegistry | None = None
    """The running OCI registry a real node pulls its images from; None: with a real node, the
    cluster starts (and stops) one of its own, serving with the cluster's CA."""
    _own_registry: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.workdir = self._work_directory(self.options.workdir, "fleetwright-cluster-")
        self.kubeconfig = self.workdir / "kubeconfig"
        self.ca_cert = self.workdir / "pki" / "ca.crt"
        self._apiserver_port = free_port()
        self.server = f"https://{LOOPBACK}:{self._apiserver_port}"

    # ----- lifecycle -------------------------------------------------------------------
    def _start(self) -> None:
        self._write_pki_and_configs()
        if self.options.real_node is not None:
            images = self.options.images
            if images is None:
                builder = offline.Builder(offline.repository(), cache_dir(), control_plane_binary)
                images = tuple(builder.all())
            if self.registry is None:
                self.registry, self._own_registry = LocalRegistry(self.workdir / "registry", self._ca), True
                self.registry.start()
            self.real_node = RealNode(
                self.options.real_node,
                self.workdir,
                self._ca,
                self._apiserver_port,
                self.kubectl,
                self.registry,
                images,
            )
        self._define_components()
        self.start_component("etcd")
        if self.real_node is not None:
            self.real_node.start_namespaces()
        for name in ("kube-apiserver", "kube-controller-manager", "kwok"):
            self.start_component(name)
        if self.options.scheduler or self.real_node is not None:
            self.start_component("kube-scheduler")
        if self.real_node is not None:
            self.real_node.start_runtime()
        self.add_nodes(self.options.nodes)

    def _stop(self) -> None:
        if self.real_node is not None:
            self.real_node.stop()
        if self._own_registry and self.registry is not None:
            self.registry.stop()
        # Reverse dependency order so nothing logs connection errors into a dying etcd.
        for name in ("kube-scheduler", "kwok", "kube-controller-manager", "kube-apiserver", "etcd"):
            component = self.components.get(name)
            if component is not None:
                component.stop()

    def start_component(self, name: str) -> None:
        component = self.components[name]
        component.start()
        self._wait_ready(name)

    def kill_component(self, name: str) -> None:
        self.components[name].kill()

    def restart_component(self, name: str) -> None:
        self.components[name].kill()
        self.start_component(name)

    @property
    def pids(self) -> dict[str, int]:
        return {n: c.pid for n, c in self.components.items() if c.running and c.pid is not None}

    # ----- configuration ---------------------------------------------------------------
    def _write_pki_and_configs(self) -> None:
        pki = self.workdir / "pki"
        ca = self._ca = LocalCA(pki)
        self._serving = ca.issue(
            "apiserver",
            common_name="kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=(LOOPBACK, "10.96.0.1"),
            server=True,
        )
        self._apiserver_kubelet_client = ca.issue(
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organization="system:masters",
        )
        admin = ca.issue("admin", common_name="fleetwright-admin", organization="system:masters")
        kcm = ca.issue("controller-manager", common_name="system:kube-controller-manager")
        kwok = ca.issue("kwok", common_name="kwok-controller", organization="system:masters")
        self._sa = write_service_account_keys(pki)
        self.kubeconfig.write_text(yaml.safe_dump(_kubeconfig(self.server, ca.cert_path, admin, "admin")))
        self._kcm_kubeconfig = self.workdir / "kcm.kubeconfig"
        self._kcm_kubeconfig.write_text(
            yaml.safe_dump(_kubeconfig(self.server, ca.cert_path, kcm, "system:kube-controller-manager"))
        )
        self._kwok_kubeconfig = self.workdir / "kwok.kubeconfig"
        self._kwok_kubeconfig.write_text(yaml.safe_dump(_kubeconfig(self.server, ca.cert_path, kwok, "kwok")))
        scheduler = ca.issue("scheduler", common_name="system:kube-scheduler")
        self._scheduler_kubeconfig = self.workdir / "scheduler.kubeconfig"
        self._scheduler_kubeconfig.write_text(
            yaml.safe_dump(_kubeconfig(self.server, ca.cert_path, scheduler, "system:kube-scheduler"))
        )
        self._admin = admin

    def _define_components(self) -> None:
        etcd_port, etcd_peer = free_port(), free_port()
        self._etcd_url = f"http://{LOOPBACK}:{etcd_port}"
        self._scheduler_port = free_port()
        argvs = {
            "etcd": self._etcd_argv(etcd_peer),
            "kube-apiserver": self._apiserver_argv(),
            "kube-controller-manager": self._controller_manager_argv(),
            "kube-scheduler": self._scheduler_argv(),
        }
        for name, argv in argvs.items():
            self.components[name] = Supervised(name, argv, self.workdir / "logs" / f"{name}.log")
        self.fleet = KwokFleet(
            self._kwok_kubeconfig,
            self.workdir,
            self.kubectl,
            nodes=self.options.nodes,
            lease_seconds=self.options.node_lease_seconds,
        )
        self.components["kwok"] = self.fleet.process

    def _etcd_argv(self, peer_port: int) -> list[str]:
        return [
            str(control_plane_binary("etcd")),
            "--name=fleetwright",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={self._etcd_url}",
            f"--advertise-client-urls={self._etcd_url}",
            f"--listen-peer-urls=http://{LOOPBACK}:{peer_port}",
            f"--initial-advertise-peer-urls=http://{LOOPBACK}:{peer_port}",
            f"--initial-cluster=fleetwright=http://{LOOPBACK}:{peer_port}",
            "--listen-metrics-urls=",
            # A disposable test store: durability comes from etcd's WAL, fsync is skipped for speed.
            "--unsafe-no-fsync",
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        return [
            str(control_plane_binary("kube-apiserver")),
            f"--etcd-servers={self._etcd_url}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={self._apiserver_port}",
            f"--tls-cert-file={self._serving.cert}",
            f"--tls-private-key-file={self._serving.key}",
            f"--client-ca-file={self.ca_cert}",
            f"--kubelet-client-certificate={self._apiserver_kubelet_client.cert}",
            f"--kubelet-client-key={self._apiserver_kubelet_client.key}",
            # The Node authorizer scopes a real node's kubelet to its own pods and secrets.
            f"--authorization-mode={'RBAC' if self.real_node is None else 'Node,RBAC'}",
            "--anonymous-auth=false",
            f"--service-account-key-file={self._sa.cert}",
            f"--service-account-signing-key-file={self._sa.key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Package stage pods are privileged and use the host's namespaces by design.
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            "--v=1",
            *(self.real_node.apiserver_args() if self.real_node is not None else ()),
            *self.options.apiserver_args,
        ]

    def _controller_manager_argv(self) -> list[str]:
        return [
            str(control_plane_binary("kube-controller-manager")),
            f"--kubeconfig={self._kcm_kubeconfig}",
            f"--authentication-kubeconfig={self._kcm_kubeconfig}",
            f"--authorization-kubeconfig={self._kcm_kubeconfig}",
            f"--controllers={','.join(self._controllers())}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self._sa.key}",
            f"--root-ca-file={self.ca_cert}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={free_port()}",
            "--concurrent-job-syncs=20",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--v=1",
            *node_monitor_grace(self.options.node_lease_seconds),
            *self.options.controller_manager_args,
        ]

    def _scheduler_argv(self) -> list[str]:
        return [
            str(control_plane_binary("kube-scheduler")),
            f"--kubeconfig={self._scheduler_kubeconfig}",
            f"--authentication-kubeconfig={self._scheduler_kubeconfig}",
            f"--authorization-kubeconfig={self._scheduler_kubeconfig}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={self._scheduler_port}",
            "--v=1",
        ]

    def _controllers(self) -> tuple[str, ...]:
        # A real node's pods back Services (the chart's webhook and embedded Temporal): the
        # apiserver and the node link reach them by their EndpointSlices. Its pods may claim
        # volumes: the binder binds a claim to a matching PersistentVolume (no provisioner here).
        if self.real_node is None:
            return CONTROLLERS
        return (*CONTROLLERS, "endpointslice-controller", "persistentvolume-binder-controller")

    # ----- readiness -------------------------------------------------------------------
    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        context.load_cert_chain(str(self._admin.cert), str(self._admin.key))
        return context

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        """A raw authenticated GET against the apiserver (status code, body)."""
        request = urllib.request.Request(self.server + path)
        try:
            with urllib.request.urlopen(request, context=self._ssl_context(), timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    def _wait_ready(self, name: str) -> None:
        component = self.components[name]
        timeout = self.options.startup_timeout
        if name == "etcd":
            check = lambda: http_ok(f"{self._etcd_url}/health")  # noqa: E731
        elif name == "kube-apiserver":
            check = lambda: http_ok(f"{self.server}/readyz", self._ssl_context())  # noqa: E731
        elif name == "kube-scheduler":
            # Its self-signed serving certificate: only liveness is checked here.
            unverified = ssl._create_unverified_context()  # noqa: S323
            check = lambda: http_ok(f"https://{LOOPBACK}:{self._scheduler_port}/healthz", unverified)  # noqa: E731
        elif name == "kube-controller-manager":
            # Ready once the service-account controller has populated the default namespace.
            check = lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200  # noqa: E731
        else:
            check = self.fleet.healthy
        wait_until(check, timeout=timeout, what=f"{name} to become ready", alive=component.check_alive)

    # ----- nodes and kubectl -----------------------------------------------------------
    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the venv's kubectl against this cluster as the admin user."""
        return run_kubectl(self.kubeconfig, *args, input=input, check=check, timeout=timeout)

    def add_nodes(self, count: int, *, wait: bool = True) -> list[str]:
        """Create ``count`` more simulated nodes and (by default) wait until kwok made them Ready."""
        return self.fleet.add_nodes(count, wait=wait)
