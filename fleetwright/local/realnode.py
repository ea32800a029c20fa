"""A real node beside the kwok fleet: a real kubelet with containerd and runc, in namespaces of its own.

It owns the node's life on the test machine: its scratch directory (``nodeconfig.NodeLayout``,
written by ``nodefiles``; what it needs of the machine and its cgroups are ``nodehost``'s), the
namespaces it runs in (a *holder*: PID 1 of new PID, mount, network and UTS namespaces, which sets
them up and then reaps orphans as the pause process), containerd with the CRI plugin, the CNI
bridge, its images (the offline-built archives pushed to the local OCI registry, which its
containerd pulls from by digest as a cluster's nodes would; only the sandbox image is imported with
``ctr``), the kubelet, the relay to the host's loopback (``nodelink``), reboots, and tearing it all
down.

What it may touch on the machine, and why that is safe (docs/real-node.md says more):

- kernel parameters: none. The kubelet's writes land in scratch files bind-mounted over exactly
  those /proc/sys files inside the node's mount namespace; the scratch host root stage pods
  mount has fake ``sysctl``, ``reboot`` and ``systemctl``;
- files: only its scratch directory, plus one cgroup directory per v1 hierarchy
  (``/sys/fs/cgroup/<controller>/fleetwright-node-<id>``, the pods' cgroup root), removed on stop;
- network: nothing in the host's namespace; the node's addresses exist only in its own;
- processes: only ones it started; stopping the holder ends every process of the node.

A *reboot* (``reboot()``, or the stage Job's agent calling the scratch root's ``reboot``) is what
the machine would do: a new boot id (``packagetest.boot``), every process of the node gone, the
runtime's state directory wiped, and containerd and the kubelet started again on the same disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from fleetwright.binaries import cache_dir, control_plane_binary
from fleetwright.images import spec as image_spec
from fleetwright.images.offline import Built
from fleetwright.local import nodeconfig, nodefiles, nodehost
from fleetwright.local.kubectl import KubectlRunner
from fleetwright.local.nodeconfig import NodeLayout
from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.local.pki import CertPair, LocalCA
from fleetwright.local.processes import Supervised, run_tool, wait_until
from fleetwright.local.ticker import Ticker
from fleetwright.packagetest import boot
from fleetwright.packagetest.hostroot import FAKE_STATE, HostRoot

REBOOT_REQUESTS = f"{FAKE_STATE}/reboot-requested"


class RealNodeUnavailableError(RuntimeError):
    """This machine cannot run the real node; the message says what is missing."""


@dataclass(frozen=True)
class RealNodeOptions:
    name: str = "fleetwright-real-0"
    labels: tuple[tuple[str, str], ...] = ()
    forwards: tuple[tuple[int, int], ...] = ()
    """(port on the node's address, port on the host's loopback): how the node's pods reach
    servers on the host, e.g. Temporal. The apiserver is always reachable at the kubernetes
    Service address."""
    ready_timeout: float = 240.0


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def _same_pid_namespace(pid: int, namespace: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == namespace
    except OSError:
        return False


@dataclass
class RealNode:
    """One real node for the control plane at ``apiserver_port``; LocalCluster drives it."""

    options: RealNodeOptions
    workdir: Path
    ca: LocalCA
    apiserver_port: int
    kubectl: KubectlRunner
    registry: LocalRegistry
    """Where its images are pushed and pulled from (started by the cluster before the node)."""
    images: Sequence[Built] = ()
    layout: NodeLayout = field(init=False)
    host_root: HostRoot = field(init=False)
    components: dict[str, Supervised] = field(init=False, default_factory=dict)
    boots: int = field(init=False, default=0)
    _holder: int | None = field(init=False, default=None)
    _cgroup_root: str = field(init=False)
    _link_client: CertPair = field(init=False)
    _lock: threading.RLock = field(init=False, default_factory=threading.RLock)
    _reboot_watch: Ticker | None = field(init=False, default=None)
    _reboots_seen: int = field(init=False, default=0)
    published: dict[str, Built] = field(init=False, default_factory=dict)
    """Each built image's ref -> the image as pushed to ``registry`` (the first boot pushes them)."""
    image_seconds: dict[str, float] = field(init=False, default_factory=dict)
    """Seconds each image's push to the registry (the sandbox image's ``ctr`` import) took."""

    def __post_init__(self) -> None:
        missing = nodehost.requirements()
        if missing:
            raise RealNodeUnavailableError("this machine cannot run the real node: " + "; ".join(missing))
        scratch = self.workdir / "real-node"
        guarded = [Path("/", d) for d in nodeconfig.GUARDED_DIRS]
        if any(scratch.resolve().is_relative_to(g) for g in guarded):
            raise RealNodeUnavailableError(f"the node's scratch directory {scratch} is under a guarded dir")
        self.layout = NodeLayout(
            scratch=scratch,
            shim_sockets=Path(tempfile.mkdtemp(prefix="fwn-", dir="/tmp")),
            bin_dir=cache_dir() / "bin",
            cni_bin_dir=(cache_dir() / "bin" / "cni").resolve(),
        )
        self._cgroup_root = nodehost.new_cgroup_root()
        self.host_root, self._link_client = nodefiles.write_files(
            self.layout,
            self.options.name,
            self.ca,
            self._cgroup_root,
            (self.registry.host, self.registry.ca_file),
        )

    # ----- the apiserver's side -----------------------------------------------------------
    def apiserver_args(self) -> list[str]:
        """Flags the apiserver needs for this node: cluster traffic (webhooks, pods/log) through
        the node link, webhook calls to endpoints rather than Service IPs (no kube-proxy), and
        NodeRestriction for the kubelet's writes (the cluster adds the Node authorizer)."""
        egress = self.workdir / "egress-selector.yaml"
        egress.write_text(yaml.safe_dump(nodeconfig.egress_selector(self.layout)))
        return [
            f"--egress-selector-config-file={egress}",
            "--enable-aggregator-routing=true",
            # The node's name resolves nowhere on the host: reach kubelets by address.
            "--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
            "--enable-admission-plugins=NodeRestriction",
        ]

    # ----- lifecycle ----------------------------------------------------------------------
    def start_namespaces(self) -> None:
        """The node's namespaces and the link to the host; before the apiserver, which sends its
        cluster traffic (kwok's included) through the link."""
        with self._lock:
            self._start_holder()
            self._start_link()

    def _start_holder(self) -> None:
        """The process that holds the node's namespaces (``setup.sh`` inside them)."""
        self.layout.ready_marker.unlink(missing_ok=True)
        holder = Supervised(
            "real-node",
            [
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
                "--mount",
                "--net",
                "--uts",
                "--propagation",
                "slave",
                "--",
                "/bin/sh",
                str(self.layout.path("setup.sh")),
            ],
            self.layout.path("logs", "namespaces.log"),
        )
        self.components["real-node"] = holder
        holder.start()
        wait_until(
            self.layout.ready_marker.exists,
            timeout=30,
            what="the real node's namespaces",
            alive=holder.check_alive,
        )
        assert holder.pid is not None
        self._holder = _children(holder.pid)[0]

    def _start_link(self) -> None:
        link = [
            sys.executable,
            "-m",
            "fleetwright.local.nodelink",
            f"--netns=/proc/{self._holder}/ns/net",
            f"--node-net={nodeconfig.NODE_IP}/32",
            f"--node-net={nodeconfig.POD_CIDR}",
            f"--egress={self.layout.egress_socket}",
            f"--listen={nodeconfig.KUBERNETES_SERVICE_IP}:{nodeconfig.KUBERNETES_SERVICE_PORT}="
            f"{self.apiserver_port}",
            *(f"--listen={nodeconfig.NODE_IP}:{port}={host}" for port, host in self.options.forwards),
            # containerd pulls from the registry at the address its images are named by.
            f"--listen={self.registry.host}={self.registry.port}",
            f"--services=https://127.0.0.1:{self.apiserver_port}",
            f"--ca={self.ca.cert_path}",
            f"--client-cert={self._link_client.cert}",
            f"--client-key={self._link_client.key}",
            f"--dns={nodeconfig.NODE_IP}:{nodeconfig.DNS_PORT}",
        ]
        process = Supervised("node-link", link, self.layout.path("logs", "node-link.log"))
        self.components["node-link"] = process
        process.start()
        wait_until(
            lambda: "ready" in process.log_tail(5),
            timeout=30,
            what="the real node's link",
            alive=process.check_alive,
        )

    def _in_node(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Supervised:
        assert self._holder is not None
        enter = ["nsenter", f"--target={self._holder}", "--mount", "--net", "--uts", "--pid", "--"]
        process = Supervised(name, [*enter, *argv], self.layout.path("logs", f"{name}.log"), env=env)
        self.components[name] = process
        process.start()
        return process

    def start_runtime(self) -> None:
        """containerd (with the images), the node's cgroup root, the kubelet; wait until Ready."""
        with self._lock:
            path = f"{self.layout.bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            self._start_containerd(path)
            if self.boots == 0:
                self._load_images()
            nodehost.make_cgroup_root(self._cgroup_root)
            self._start_kubelet(path)
            self._reboots_seen = len(self.reboot_requests())

    def _start_containerd(self, path: str) -> None:
        containerd = self._in_node(
            "containerd",
            [
                str(control_plane_binary("containerd")),
                f"--config={self.layout.path('containerd.toml')}",
                "--log-level=warn",
            ],
            env={"PATH": path, "HOME": str(self.layout.scratch)},
        )
        wait_until(
            lambda: self._ctr("version", check=False).returncode == 0,
            timeout=60,
            what="containerd",
            alive=containerd.check_alive,
            interval=0.5,
        )

    def _start_kubelet(self, path: str) -> None:
        """The kubelet, counted as a boot; returns once the node is Ready."""
        labels = ",".join(f"{k}={v}" for k, v in self.options.labels)
        kubelet = self._in_node(
            "kubelet",
            [
                str(control_plane_binary("kubelet")),
                f"--config={self.layout.path('kubelet.yaml')}",
                f"--kubeconfig={self.layout.path('kubelet.kubeconfig')}",
                f"--root-dir={self.layout.kubelet_dir}",
                f"--cert-dir={self.layout.kubelet_dir / 'pki'}",
                f"--hostname-override={self.options.name}",
                f"--node-ip={nodeconfig.NODE_IP}",
                *([f"--node-labels={labels}"] if labels else []),
                "--v=1",
            ],
            env={"PATH": path},
        )
        self.boots += 1
        wait_until(
            self.ready,
            timeout=self.options.ready_timeout,
            what=f"node {self.options.name} to become Ready",
            alive=kubelet.check_alive,
            interval=1.0,
        )

    def _ctr(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        argv = [str(control_plane_binary("ctr")), f"--address={self.layout.containerd_socket}", *args]
        return run_tool(argv, what=f"ctr {' '.join(args)}", check=check, timeout=timeout)

    def _load_images(self) -> None:
        """Every image pushed to the registry, but the sandbox image: containerd's pinned pause
        image, imported as a node's image preloads it."""
        for image in self.images:
            started = time.monotonic()
            if image.ref == image_spec.PAUSE_REF:
                base = f"--base-name={image.repository}"
                self._ctr("-n", "k8s.io", "images", "import", base, str(image.archive))
            else:
                self.published[image.ref] = self.registry.publish(image)
            self.image_seconds[image.ref] = time.monotonic() - started

    def image(self, ref: str) -> Built:
        """The image built as ``ref`` (``spec.FLEETWRIGHT.ref``, a ``package_ref``), as this node
        pulls it: from the registry."""
        return self.published[ref]

    def image_refs(self) -> set[str]:
        """The image references containerd holds (``ctr images ls``)."""
        return set(self._ctr("-n", "k8s.io", "images", "ls", "-q").stdout.split())

    def ready(self) -> bool:
        done = self.kubectl("get", "node", self.options.name, "-o", "json", check=False)
        if done.returncode != 0:
            return False
        conditions = json.loads(done.stdout).get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _shut_down(self, grace: float) -> None:
        """What a machine does on the way down: SIGTERM to every process of the node, a grace
        period, then the end of its PID namespace (the kernel kills whatever is left)."""
        holder = self.components.get("real-node")
        if self._holder is not None and holder is not None and holder.running:
            namespace = os.readlink(f"/proc/{self._holder}/ns/pid")
            members = [
                int(p)
                for p in os.listdir("/proc")
                if p.isdigit() and int(p) != self._holder and _same_pid_namespace(int(p), namespace)
            ]
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(_same_pid_namespace(p, namespace) for p in members):
                time.sleep(0.1)
        for name in ("kubelet", "containerd", "real-node", "node-link"):
            process = self.components.pop(name, None)
            if process is not None:
                process.stop(timeout=5)
        self._holder = None

    def stop(self) -> None:
        with self._lock:
            if self._reboot_watch is not None:
                self._reboot_watch.__exit__(None, None, None)
                self._reboot_watch = None
            self._shut_down(grace=5)
            nodehost.remove_cgroup_tree(self._cgroup_root)
            shutil.rmtree(self.layout.shim_sockets, ignore_errors=True)

    # ----- reboots ------------------------------------------------------------------------
    def reboot_requests(self) -> list[str]:
        path = self.host_root.host(REBOOT_REQUESTS)
        return Path(path).read_text().splitlines() if os.path.exists(path) else []

    def reboot(self) -> str:
        """Reboot the node: shut down, a new boot id, boot again. Returns the new boot id."""
        with self._lock:
            self._shut_down(grace=5)
            shutil.rmtree(self.layout.path("containerd", "state"), ignore_errors=True)
            new_boot = boot.simulate_reboot(self.host_root)
            self.start_namespaces()
            self.start_runtime()
            return new_boot

    def watch_reboots(self, interval: float = 0.5) -> None:
        """Reboot whenever the scratch root's ``reboot`` was called (the part the machine's
        kernel plays for a stage Job's reboot interrupt)."""
        self._reboots_seen = len(self.reboot_requests())

        def tick() -> None:
            if len(self.reboot_requests()) > self._reboots_seen:
                self.reboot()

        self._reboot_watch = Ticker(tick, interval, name="real-node-reboots").__enter__()

    def boot_id(self) -> str:
        return self.host_root.boot_id()

    @property
    def cgroup_root(self) -> str:
        """The pods' cgroup root (``/fleetwright-node-<id>`` in every hierarchy)."""
        return self._cgroup_root


def linked_to_temporal(options: RealNodeOptions, host_port: int) -> RealNodeOptions:
    """``options`` whose pods reach the Temporal server on the host's loopback ``host_port`` at
    ``nodeconfig.TEMPORAL_ADDRESS``."""
    return replace(options, forwards=(*options.forwards, (nodeconfig.TEMPORAL_PORT, host_port)))


def engine_fields(node: RealNode) -> dict[str, str]:
    """The rollout engine's settings the node decides: stage pods mount its scratch host root, and
    run the agent image this checkout built, by its digest in the node's registry."""
    return {"host_root": str(node.host_root.path), "agent_image": node.image(image_spec.AGENT.ref).pinned()}


def chart_settings(node: RealNode, temporal_address: str | None) -> list[str]:
    """``helm install`` flags that run the chart's processes on this node (the scheduler would
    otherwise also place them on kwok nodes, which only pretend to run them) from the images this
    checkout built, pulled from the node's registry by digest as the README's install sets them,
    reaching Temporal at ``temporal_address`` and pointing stage Jobs at the node's scratch host
    root."""
    flags: list[str] = []
    for key, image in (("image", image_spec.FLEETWRIGHT), ("temporal.embedded.image", image_spec.TEMPORAL)):
        pushed = node.image(image.ref)
        flags += ["--set", f"{key}.repository={pushed.repository}", "--set", f"{key}.digest={pushed.digest}"]
    for key, value in engine_fields(node).items():
        flags += ["--set", f"settings.engine.{key}={value}"]
    if temporal_address is not None:
        flags += ["--set", f"settings.temporal_address={temporal_address}"]
    for component in ("worker", "controller", "webhook"):
        flags += ["--set", f"{component}.nodeSelector.kubernetes\\.io/hostname={node.options.name}"]
    return flags
