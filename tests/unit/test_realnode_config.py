"""The real node's configuration keeps everything it writes in its scratch directory, and keeps
the kubelet's kernel-parameter writes off the machine's kernel."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from fleetwright.local import nodeconfig

pytestmark = pytest.mark.unit

LAYOUT = nodeconfig.NodeLayout(
    scratch=Path("/scratch/node"),
    shim_sockets=Path("/tmp/fwn-x"),
    bin_dir=Path("/cache/bin"),
    cni_bin_dir=Path("/cache/cni"),
)
# Absolute paths the node may name outside its scratch directory: read-only inputs.
READ_ONLY = {nodeconfig.RUNC, nodeconfig.RESOLV_CONF}


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def outside(paths: list[str]) -> list[str]:
    allowed = (LAYOUT.scratch, LAYOUT.shim_sockets, LAYOUT.bin_dir, LAYOUT.cni_bin_dir, Path("/certs"))
    return [
        p
        for p in paths
        if p.startswith("/") and p not in READ_ONLY and not any(Path(p).is_relative_to(a) for a in allowed)
    ]


def test_containerd_writes_only_under_the_scratch_directory() -> None:
    config = tomllib.loads(nodeconfig.containerd_config(LAYOUT, "localhost/fleetwright/pause:3.10.2"))
    assert outside(strings(config)) == []
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["netns_mounts_under_state_dir"] is True
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["disable_apparmor"] is True
    assert "io.containerd.internal.v1.opt" in config["disabled_plugins"]
    assert len(str(LAYOUT.shim_sockets)) <= 42


def test_containerd_pulls_from_the_local_registry_over_tls_trusting_its_ca() -> None:
    hosts = tomllib.loads(nodeconfig.registry_hosts("127.0.0.1:5443", Path("/certs/ca.crt")))
    assert hosts == {
        "server": "https://127.0.0.1:5443",
        "host": {"https://127.0.0.1:5443": {"capabilities": ["pull", "resolve"], "ca": "/certs/ca.crt"}},
    }


def test_the_kubelet_writes_only_under_the_scratch_directory() -> None:
    config = nodeconfig.kubelet_config(
        LAYOUT,
        ca=Path("/certs/ca.crt"),
        serving=(Path("/certs/s.crt"), Path("/certs/s.key")),
        cgroup_root="/fw-x",
    )
    assert config.pop("cgroupRoot") == "/fw-x"  # a cgroup, under the machine's cgroup mounts
    assert outside(strings(config)) == []
    assert config["failCgroupV1"] is False
    assert config["makeIPTablesUtilChains"] is False
    cni = nodeconfig.cni_network(LAYOUT)
    assert outside(strings(cni)) == []
    assert cni["plugins"][0]["ipMasq"] is False


def test_the_kubelets_kernel_parameters_are_scratch_files_in_its_namespace() -> None:
    """The kubelet may write its kernel parameters only because they are bind mounts there."""
    script = nodeconfig.namespace_setup(LAYOUT, "node-a", Path("/cache/bin/pause"))
    config = nodeconfig.kubelet_config(
        LAYOUT, ca=Path("/c"), serving=(Path("/s"), Path("/k")), cgroup_root="/fw-x"
    )
    assert config["protectKernelDefaults"] is False
    for key in nodeconfig.KUBELET_SYSCTLS:
        assert f"mount --bind {LAYOUT.sysctl_file(key)} /proc/sys/{key}\n" in script
    for directory in nodeconfig.GUARDED_DIRS:
        assert f"mount --bind {LAYOUT.guarded(directory)} /{directory}\n" in script
    lines = script.splitlines()
    # Propagation is set before any mount, so none of them can reach the machine's namespace.
    assert lines.index("mount --make-rshared /") < min(i for i, line in enumerate(lines) if "--bind" in line)
    assert lines[-1] == "exec /cache/bin/pause"
