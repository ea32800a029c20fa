"""The real test node's layout and configuration files: where everything lives and what it says.

Pure: it renders containerd's ``config.toml``, the CNI network, the kubelet's configuration and
kubeconfig, the apiserver's egress selector and the script that sets up the node's namespaces,
from a ``NodeLayout`` (every path under one scratch directory). Nothing here starts a process or
writes a file; ``nodefiles`` and ``realnode`` do.
Every path these files name is under the scratch directory, apart from the binaries, runc and the
host's read-only resolver configuration (a unit test checks it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The node's own address (on its loopback device, inside its network namespace), its pods'
# network, and the kubernetes Service address its pods use for the apiserver. None of them exists
# outside the node's network namespace.
NODE_IP = "10.213.0.2"
POD_CIDR = "10.88.0.0/24"
KUBERNETES_SERVICE_IP = "10.96.0.1"
KUBERNETES_SERVICE_PORT = 443
# The apiserver's Service range: a local route inside the node, so that the node link can listen on
# any ClusterIP (``services``); the node's DNS responder for Service names is at its own address.
SERVICE_CIDR = "10.96.0.0/16"
DNS_PORT = 53
CLUSTER_DOMAIN = "cluster.local"
# Where the node's pods reach a Temporal server running on the host (relayed to its loopback port).
TEMPORAL_PORT = 7233
TEMPORAL_ADDRESS = f"{NODE_IP}:{TEMPORAL_PORT}"
KUBELET_PORT = 10250
BRIDGE = "fw0"
# The kernel parameters the kubelet's container manager sets on start (vm.overcommit_memory=1,
# kernel.panic=10, kernel.panic_on_oops=1, ...). Inside the node's mount namespace these files
# are bind mounts of scratch copies, so its writes never reach the machine's kernel.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
BOOT_ID = "kernel/random/boot_id"
# Host directories replaced by scratch ones inside the node's mount namespace: defaults of the
# kubelet, containerd and the CNI plugins live under them (a second guard behind the configured
# paths). /run gets a tmpfs, as it is on a booted machine.
GUARDED_DIRS = ("var/lib", "var/log", "opt")
# Defaults the node's programs would write to were they not configured; none may ever appear.
HOST_DEFAULTS = (
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/run/netns",
    "/run/nri",
    "/etc/cni",
    "/etc/cdi",
    "/etc/containerd",
    "/etc/kubernetes",
    "/opt/cni",
    "/opt/containerd",
    "/usr/libexec/kubernetes",
)
# containerd plugins the node does not use; the opt plugin would create /opt/containerd, NRI a
# socket under /var/run, the rest need kernel features or tools this node has no use for.
DISABLED_PLUGINS = (
    "io.containerd.internal.v1.opt",
    "io.containerd.nri.v1.nri",
    "io.containerd.image-verifier.v1.bindir",
    "io.containerd.snapshotter.v1.blockfile",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.erofs",
    "io.containerd.differ.v1.erofs",
    "io.containerd.mount-handler.v1.erofs",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.snapshotter.v1.native",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
)
RUNC = "/usr/sbin/runc"
RESOLV_CONF = "/etc/resolv.conf"


@dataclass(frozen=True)
class NodeLayout:
    """Every path of one real node. ``scratch`` holds it all except the shim sockets, whose
    directory must be short (unix socket paths are limited; containerd allows 42 characters)."""

    scratch: Path
    shim_sockets: Path
    bin_dir: Path
    cni_bin_dir: Path

    def path(self, *parts: str) -> Path:
        return self.scratch.joinpath(*parts)

    @property
    def host_root(self) -> Path:
        return self.path("host-root")

    @property
    def containerd_socket(self) -> Path:
        return self.path("containerd", "containerd.sock")

    @property
    def egress_socket(self) -> Path:
        return self.path("egress.sock")

    @property
    def kubelet_dir(self) -> Path:
        return self.path("kubelet")

    @property
    def ready_marker(self) -> Path:
        return self.path("namespaces-ready")

    def sysctl_file(self, key: str) -> Path:
        return self.path("sysctl", key.replace("/", "."))

    def guarded(self, directory: str) -> Path:
        return self.path("guarded", directory.replace("/", "-"))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _toml(tables: dict[str, dict[str, Any]], top: dict[str, Any]) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    for name, table in tables.items():
        lines += ["", f"[{name}]", *(f"  {k} = {_toml_value(v)}" for k, v in table.items())]
    return "\n".join(lines) + "\n"


def containerd_config(layout: NodeLayout, sandbox_image: str) -> str:
    cri_runtime = "plugins.'io.containerd.cri.v1.runtime'"
    return _toml(
        {
            "plugins.'io.containerd.server.v1.grpc'": {"address": str(layout.containerd_socket)},
            "plugins.'io.containerd.server.v1.ttrpc'": {"address": str(layout.containerd_socket) + ".ttrpc"},
            "plugins.'io.containerd.cri.v1.images'": {"snapshotter": "overlayfs"},
            "plugins.'io.containerd.cri.v1.images'.pinned_images": {"sandbox": sandbox_image},
            "plugins.'io.containerd.cri.v1.images'.registry": {"config_path": str(layout.path("registry"))},
            cri_runtime: {
                # No AppArmor profile is ever loaded into the machine's kernel for the node's pods.
                "disable_apparmor": True,
                # This machine withholds CAP_SYS_RESOURCE, so a negative oom_score_adj (-998 for
                # every pod sandbox) cannot be set: clamp it to containerd's own instead.
                "restrict_oom_score_adj": True,
                "netns_mounts_under_state_dir": True,
                "cdi_spec_dirs": [],
                "enable_criu": False,
            },
            f"{cri_runtime}.containerd": {"default_runtime_name": "runc"},
            f"{cri_runtime}.containerd.runtimes.runc": {"runtime_type": "io.containerd.runc.v2"},
            f"{cri_runtime}.containerd.runtimes.runc.options": {
                "BinaryName": RUNC,
                "Root": str(layout.path("runc")),
                "SystemdCgroup": False,
            },
            f"{cri_runtime}.cni": {
                "bin_dirs": [str(layout.cni_bin_dir)],
                "conf_dir": str(layout.path("cni", "net.d")),
            },
            "plugins.'io.containerd.grpc.v1.cri'": {"stream_server_address": "127.0.0.1"},
            "plugins.'io.containerd.shim.v1.manager'": {"socket_dir": str(layout.shim_sockets)},
            "plugins.'io.containerd.transfer.v1.local'": {"config_path": str(layout.path("registry"))},
        },
        {
            "version": 4,
            "root": str(layout.path("containerd", "root")),
            "state": str(layout.path("containerd", "state")),
            "temp": str(layout.path("containerd", "tmp")),
            # An empty list means the default (/etc/containerd/conf.d): a scratch glob instead.
            "imports": [str(layout.path("containerd", "conf.d", "*.toml"))],
            "disabled_plugins": list(DISABLED_PLUGINS),
        },
    )


def registry_hosts(host: str, ca: Path) -> str:
    """containerd's ``hosts.toml`` for the registry at ``host`` (``address:port``): pull and
    resolve over TLS verified by ``ca``, the local CA the registry serves with."""
    server = f"https://{host}"
    return _toml(
        {f'host."{server}"': {"capabilities": ["pull", "resolve"], "ca": str(ca)}},
        {"server": server},
    )


def cni_network(layout: NodeLayout) -> dict[str, Any]:
    """A bridge with the node as the pods' gateway; no masquerade (nothing leaves the node's
    namespace except through the node link)."""
    return {
        "cniVersion": "1.0.0",
        "name": "fleetwright",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(layout.path("cni", "ipam")),
                },
            }
        ],
    }


def kubelet_config(
    layout: NodeLayout, *, ca: Path, serving: tuple[Path, Path], cgroup_root: str
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "tlsCertFile": str(serving[0]),
        "tlsPrivateKeyFile": str(serving[1]),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        # This machine has a cgroup v1 hierarchy; the kubelet refuses one since 1.35 unless told.
        "failCgroupV1": False,
        # Its kernel parameter writes go to scratch files (see KUBELET_SYSCTLS), so it may write.
        "protectKernelDefaults": False,
        "makeIPTablesUtilChains": False,
        "failSwapOn": False,
        "resolvConf": RESOLV_CONF,
        # Pods resolve Service names through the node link's responder (``services``).
        "clusterDNS": [NODE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "podLogsDir": str(layout.path("pod-logs")),
        "volumePluginDir": str(layout.path("volume-plugins")),
        "registerNode": True,
        "maxPods": 40,
        "serializeImagePulls": False,
        # Images come from ctr import and must never be collected; the machine's disk is shared,
        # so only a nearly full disk may count as pressure.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
        "shutdownGracePeriod": "0s",
        "kubeAPIQPS": 50,
        "kubeAPIBurst": 100,
    }


def kubeconfig(server: str, ca: Path, cert: Path, key: Path, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }


def egress_selector(layout: NodeLayout) -> dict[str, Any]:
    """The apiserver's EgressSelectorConfiguration: its cluster traffic (webhooks, pods/log) goes
    through the node link's socket."""
    return {
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [
            {
                "name": "cluster",
                "connection": {
                    "proxyProtocol": "HTTPConnect",
                    "transport": {"uds": {"udsName": str(layout.egress_socket)}},
                },
            }
        ],
    }


def namespace_setup(layout: NodeLayout, hostname: str, pause: Path) -> str:
    """The shell script PID 1 of the node's namespaces runs before it becomes the pause process
    (which reaps orphans): mounts, addresses, hostname, then the ready marker."""
    steps = [
        "set -eu",
        # Mounts made from now on propagate to the node's containers (HostToContainer mounts
        # need a shared or slave root) but never back to the machine: the root is a slave of it.
        "mount --make-rshared /",
        "mount -t tmpfs -o mode=0755 tmpfs /run",
        *(f"mount --bind {layout.guarded(d)} /{d}" for d in GUARDED_DIRS),
        *(f"mount --bind {layout.sysctl_file(k)} /proc/sys/{k}" for k in KUBELET_SYSCTLS),
        f"mount --bind {layout.host_root}/proc/sys/{BOOT_ID} /proc/sys/{BOOT_ID}",
        "ip link set lo up",
        f"ip addr add {NODE_IP}/32 dev lo",
        f"ip addr add {KUBERNETES_SERVICE_IP}/32 dev lo",
        f"ip route add local {SERVICE_CIDR} dev lo",
        f"hostname {hostname}",
        f"touch {layout.ready_marker}",
        f"exec {pause}",
    ]
    return "\n".join(steps) + "\n"
