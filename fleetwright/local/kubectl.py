"""kubectl against a local cluster: running it with a kubeconfig, and the two things every local
cluster needs done through it (the package namespace, waiting for CRDs to be Established). The
local infrastructure uses kubectl so that it stays out of the Kubernetes client.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from fleetwright.binaries import wheel_binary
from fleetwright.local.processes import run_tool, wait_until


def run_kubectl(
    kubeconfig: Path, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run the venv's kubectl with ``kubeconfig``; with ``check``, fail with kubectl's stderr."""
    argv = [str(wheel_binary("kubectl")), f"--kubeconfig={kubeconfig}", *args]
    return run_tool(argv, what=f"kubectl {' '.join(args)}", input=input, check=check, timeout=timeout)


KubectlRunner = Callable[..., subprocess.CompletedProcess[str]]
ESTABLISHED = 'jsonpath={.status.conditions[?(@.type=="Established")].status}'


def create_package_namespace(kubectl: KubectlRunner, name: str) -> None:
    """What the chart does on a real cluster: the package stage Jobs' namespace, privileged for Pod
    Security (they change the host). The worker holds no right to create namespaces."""
    labels = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}
    manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    kubectl("apply", "-f", "-", input=json.dumps(manifest))


def wait_established(kubectl: KubectlRunner, crds: Iterable[str], *, timeout: float = 60.0) -> None:
    """Wait until every named CustomResourceDefinition is Established. ``kubectl wait`` does not
    wait on a CRD the apiserver has not given conditions yet: it fails at once ("<nil> is of the
    type <nil>"), which a loaded machine made CI hit."""
    for name in crds:

        def established(name: str = name) -> bool:
            return kubectl("get", "crd", name, "-o", ESTABLISHED, check=False).stdout == "True"

        wait_until(established, timeout=timeout, what=f"crd/{name} to be Established")
