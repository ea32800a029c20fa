"""The Kubeflow training operator (v1: PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob) beside a
local control plane, so training pods carry the owner references of their real controller
(Pod -> PyTorchJob) rather than labels a test wrote: ``cluster up --workloads`` and the integration
tier's ``training_operator`` fixture run it. ``tools/build-training-operator.sh`` builds it and
copies its CRDs from the same Go module into the cache.

Owns installing those CRDs, what the operator's certificate rotator needs before it reports ready
(its namespace, the webhook Secret, a serving certificate on disk), starting it with the cluster's
admin kubeconfig and loopback ports, waiting until it is ready, and stopping it. Its validating
webhooks are not registered with the apiserver (no Service routes to a local process): jobs are
admitted by the CRDs' schemas alone. It must not create or watch any training job itself.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from fleetwright import certs
from fleetwright.binaries import cached_manifests, control_plane_binary
from fleetwright.local.kubectl import KubectlRunner, wait_established
from fleetwright.local.launcher import Launcher
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.processes import Supervised, wait_until

NAME = "training-operator"
NAMESPACE = "kubeflow"
"""Where the operator keeps its webhook Secret (``MY_POD_NAMESPACE``); jobs go in any namespace."""
WEBHOOK_SECRET = "training-operator-webhook-cert"  # noqa: S105 - a Secret's name
# The operator's rotator waits for the serving certificate at this fixed path (where a pod mounts
# the Secret) before it reports ready, while its webhook server serves the one under $TMPDIR: the
# stack's own certificate goes there, and a copy here only when none is (another local operator's
# is as good: nothing but that wait reads it).
ROTATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # noqa: S108 - the operator's constant
CERT_SUBDIR = Path("k8s-webhook-server/serving-certs")
START_TIMEOUT = 120.0


@dataclass
class TrainingOperator(Launcher):
    """The operator against the cluster at ``kubeconfig``. Use as a context manager."""

    kubeconfig: Path
    kubectl: KubectlRunner
    workdir: Path | None = None
    """Keep its certificate and log here (kept afterwards); a temporary directory when None."""
    jobs: tuple[str, ...] = ()
    """Only these job kinds' CRDs and controllers, by plural (``pytorchjobs``); every kind when
    empty. Each CRD holds a whole pod template per replica: installing all six takes seconds."""
    process: Supervised = field(init=False)
    probe_port: int = field(init=False, default_factory=free_port)
    metrics_port: int = field(init=False, default_factory=free_port)
    webhook_port: int = field(init=False, default_factory=free_port)

    def __post_init__(self) -> None:
        binary = control_plane_binary(NAME)  # before a temporary directory exists to leak
        self.workdir = self._work_directory(self.workdir, "fleetwright-training-operator-")
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "MY_POD_NAMESPACE": NAMESPACE,
            "TMPDIR": str(self.workdir / "tmp"),
        }
        argv = [
            str(binary),
            f"--health-probe-bind-address={LOOPBACK}:{self.probe_port}",
            f"--metrics-bind-address={LOOPBACK}:{self.metrics_port}",
            f"--webhook-server-port={self.webhook_port}",
            *(f"--enable-scheme={plural.removesuffix('s')}" for plural in self.jobs),
        ]
        self.process = Supervised(NAME, argv, self.workdir / f"{NAME}.log", env)

    def _start(self) -> None:
        crds = self.crds()
        # Server-side: a PyTorchJob's schema (a whole pod template per replica) is too large for
        # the last-applied annotation of a client-side apply.
        self.kubectl("apply", "--server-side", "--force-conflicts", *(f"--filename={c}" for c in crds))
        wait_established(self.kubectl, [crd_name(path) for path in crds])
        self._prepare_rotator()
        self.process.start()
        wait_until(
            self.ready,
            timeout=START_TIMEOUT,
            what="the training operator to become ready",
            interval=0.5,
            alive=self.process.check_alive,
        )

    def crds(self) -> list[Path]:
        """The CRD files of ``jobs`` (all when empty); fails naming a kind the module has none of."""
        found = {crd_name(path).partition(".")[0]: path for path in cached_manifests(NAME).glob("*.yaml")}
        unknown = sorted(set(self.jobs) - set(found))
        if unknown:
            raise ValueError(f"jobs: no CRD for {unknown} in the training operator (it has {sorted(found)})")
        return [found[plural] for plural in sorted(self.jobs or found)]

    def _stop(self) -> None:
        # v1.8.1 stops on SIGTERM and then panics closing its certificates' channel a second time
        # (main's deferred close after the rotator's): its exit status says nothing here.
        self.process.stop()

    def _prepare_rotator(self) -> None:
        """The namespace and the (empty) Secret the rotator fills, and the serving certificate."""
        self.kubectl("create", "namespace", NAMESPACE, check=False)
        self.kubectl("create", "secret", "generic", WEBHOOK_SECRET, "-n", NAMESPACE, check=False)
        assert self.workdir is not None
        bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=[LOOPBACK])
        certs.write_bundle(bundle, self.workdir / "tmp" / CERT_SUBDIR)
        if not (ROTATOR_CERT_DIR / "tls.crt").exists():
            certs.write_bundle(bundle, ROTATOR_CERT_DIR)

    def ready(self) -> bool:
        """Its readiness probe answers 200: certificates in place, webhook server and controllers up."""
        url = f"http://{LOOPBACK}:{self.probe_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status) == 200
        except (urllib.error.URLError, OSError):
            return False


def crd_name(path: Path) -> str:
    """``pytorchjobs.kubeflow.org`` from the module's ``kubeflow.org_pytorchjobs.yaml``."""
    group, _, plural = path.stem.partition("_")
    return f"{plural}.{group}"
