"""The ``helm install`` the node tier runs, written once: the README's install (the chart from this
checkout, the images pushed to a registry and pinned by the digests the offline builder printed:
``realnode.chart_settings``, with the real node's scratch host root and nodeSelector), so the
chart, upgrade and embedded-Temporal tests and the README cannot drift apart."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleetwright.images import spec as image_spec
from fleetwright.images.offline import Built
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from tests.support.chartrbac import PACKAGES, helm
from tests.support.engine import kubectl_json

# The embedded Temporal's database claim binds to a static PersistentVolume of this class (the
# local cluster has no provisioner); a real cluster names its own class, or none for its default.
LOCAL_STORAGE_CLASS = "fleetwright-local"
USER = 65532  # the temporal image's user (spec.TEMPORAL): it owns the database directory


def built(real_node: RealNode, image: image_spec.ProductImage) -> Built:
    """The image ``image`` this checkout built, as the real node pulls it: from its registry."""
    return real_node.image(image.ref)


def chart_values(digest: str, queue: str, settings: list[str]) -> list[str]:
    """``settings`` (``realnode.chart_settings``), the fleetwright image by ``digest`` (another
    build's, e.g. a previous release's, wins over the one they name), a task queue of the test's
    own."""
    return [*settings, "--set", f"image.digest={digest}", "--set", f"settings.task_queue={queue}"]


def embedded_temporal_values(real_node: RealNode, size: str) -> list[str]:
    """The embedded Temporal's claim on the local class, and its pod and the ``helm test`` pods on
    the real node (the scheduler would place them on kwok nodes too); its image is
    ``realnode.chart_settings``'s."""
    node = real_node.options.name
    return [
        "--set",
        f"temporal.embedded.persistence.storageClassName={LOCAL_STORAGE_CLASS}",
        "--set",
        f"temporal.embedded.persistence.size={size}",
        "--set",
        f"temporal.embedded.nodeSelector.kubernetes\\.io/hostname={node}",
        "--set",
        f"helmTest.nodeSelector.kubernetes\\.io/hostname={node}",
    ]


def install_args(release: str, chart: Path, namespace: str, values: list[str]) -> list[str]:
    """``helm install`` of ``chart`` into a new ``namespace``, returning once every pod is Ready."""
    return [
        "install",
        release,
        str(chart),
        "-n",
        namespace,
        "--create-namespace",
        *values,
        "--wait",
        "--timeout",
        "10m",
    ]


def local_volume(cluster: LocalCluster, real_node: RealNode, name: str, size: str) -> None:
    """A static hostPath PersistentVolume of ``LOCAL_STORAGE_CLASS`` on the real node's scratch
    disk, owned by the temporal image's user, for the embedded Temporal's claim."""
    path = real_node.layout.path("volumes", name)
    path.mkdir(parents=True)
    os.chown(path, USER, USER)
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": LOCAL_STORAGE_CLASS,
            "hostPath": {"path": str(path), "type": "Directory"},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(volume))


def uninstall_keeping_the_package_namespace(
    cluster: LocalCluster, home: Path, release: str, namespace: str
) -> None:
    """``helm uninstall --wait``; then no cluster-scoped object of the release is left, and the
    package namespace is, kept by the chart on purpose (its stage Jobs' logs)."""
    helm(cluster, home, "uninstall", release, "-n", namespace, "--wait")
    kinds = (
        "clusterrole,clusterrolebinding,validatingwebhookconfiguration,mutatingwebhookconfiguration,"
        "validatingadmissionpolicy,validatingadmissionpolicybinding"
    )
    left = cluster.kubectl("get", kinds, "-l", f"app.kubernetes.io/instance={release}", "-o", "name").stdout
    assert left.strip() == "", left
    kept = kubectl_json(cluster, "namespace", PACKAGES)["metadata"]["annotations"]
    assert kept["helm.sh/resource-policy"] == "keep"
