"""The real node's scratch directory written: its directories, scratch copies of the kernel
parameters its kubelet sets, the host root its stage pods mount, the configuration files
``nodeconfig`` renders, and the node's certificates.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from fleetwright.binaries import control_plane_binary
from fleetwright.images import spec as image_spec
from fleetwright.local import nodeconfig, nodehost
from fleetwright.local.nodeconfig import NodeLayout
from fleetwright.local.pki import CertPair, LocalCA
from fleetwright.packagetest import hostroot
from fleetwright.packagetest.hostroot import HostRoot


def write_files(
    layout: NodeLayout, name: str, ca: LocalCA, cgroup_root: str, registry: tuple[str, Path]
) -> tuple[HostRoot, CertPair]:
    """Everything the node ``name`` reads under ``layout``, trusting the image registry
    ``registry`` (its ``address:port`` and CA bundle); returns its host root and the node link's
    client certificate."""
    for directory in ("containerd", "registry", "runc", "cni/net.d", "cni/ipam", "pod-logs", "sysctl"):
        layout.path(*directory.split("/")).mkdir(parents=True, exist_ok=True)
    for directory in nodeconfig.GUARDED_DIRS:
        layout.guarded(directory).mkdir(parents=True, exist_ok=True)
    # The kubelet's kernel parameters start from the machine's values, in scratch files.
    for key, value in nodehost.kernel_parameters().items():
        layout.sysctl_file(key).write_text(value + "\n")
    host_root = hostroot.build(str(layout.host_root))
    layout.path("containerd.toml").write_text(nodeconfig.containerd_config(layout, image_spec.PAUSE_REF))
    host, registry_ca = registry
    layout.path("registry", host).mkdir(exist_ok=True)
    layout.path("registry", host, "hosts.toml").write_text(nodeconfig.registry_hosts(host, registry_ca))
    layout.path("cni", "net.d", "10-fleetwright.conflist").write_text(
        json.dumps(nodeconfig.cni_network(layout), indent=1)
    )
    pki = layout.kubelet_dir / "pki"
    client = ca.issue(f"node-{name}", common_name=f"system:node:{name}", organization="system:nodes")
    serving = ca.issue(
        f"node-{name}-serving", common_name=name, ip_addresses=(nodeconfig.NODE_IP,), server=True
    )
    # The node link reads Services and EndpointSlices cluster-wide, as kube-proxy would.
    link_client = ca.issue("node-link", common_name="fleetwright-node-link", organization="system:masters")
    pki.mkdir(parents=True, exist_ok=True)
    server = f"https://{nodeconfig.KUBERNETES_SERVICE_IP}:{nodeconfig.KUBERNETES_SERVICE_PORT}"
    layout.path("kubelet.kubeconfig").write_text(
        yaml.safe_dump(
            nodeconfig.kubeconfig(server, ca.cert_path, client.cert, client.key, f"system:node:{name}")
        )
    )
    config = nodeconfig.kubelet_config(
        layout, ca=ca.cert_path, serving=(serving.cert, serving.key), cgroup_root=cgroup_root
    )
    layout.path("kubelet.yaml").write_text(yaml.safe_dump(config))
    pause = control_plane_binary("pause")
    layout.path("setup.sh").write_text(nodeconfig.namespace_setup(layout, name, pause))
    return host_root, link_client
