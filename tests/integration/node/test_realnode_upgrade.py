"""``helm upgrade`` mid-rollout on the real node (docs/upgrading.md): the previous release's chart
and image, built by its own offline builder from its commit in git history, run a rollout whose
stage is running on the real node when the release is upgraded to this checkout's chart and
image. The rollout completes under the new pods, with exactly one Job per node, package, version
and stage, the CRDs kept, and no failed workflow task or replaced run in any history."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client

from fleetwright.images import spec as image_spec
from fleetwright.images.offline import Built
from fleetwright.local import realnode
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.packagetest.hostroot import HostRoot
from tests.support.chartinstall import built, chart_values, install_args
from tests.support.chartrbac import CHART, PACKAGES, helm
from tests.support.engine import kubectl_json, unique
from tests.support.realnode import (
    apply_marked_rollout,
    assert_each_stage_ran_once,
    delete_rollout,
    wait_real_stage_running,
)
from tests.support.releases import build_image, checkout, history_problems, previous

pytestmark = [pytest.mark.node, pytest.mark.timeout(1500)]

# Long enough that the upgrade's new pods come up while the real node's stage still runs.
STAGE_SECONDS = 25


@dataclass
class PreviousRelease:
    """The previous release installed by its own chart, running its own image."""

    release: str
    namespace: str
    queue: str
    home: Path
    settings: list[str]


def this_image(real_node: RealNode) -> Built:
    return built(real_node, image_spec.FLEETWRIGHT)


@pytest.fixture(scope="module")
def installed_previous(
    cluster: LocalCluster,
    real_node: RealNode,
    temporal_on_node: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PreviousRelease]:
    tree = checkout(previous(), tmp_path_factory.mktemp("release"))
    image = real_node.registry.publish(build_image(tree, image_spec.FLEETWRIGHT.ref))
    assert image.digest != this_image(real_node).digest, "the previous release's image is this checkout's"
    home = tmp_path_factory.mktemp("helm")
    installed = PreviousRelease(
        unique("fwu"),
        unique("fwu-system"),
        unique("upgrade"),
        home,
        realnode.chart_settings(real_node, temporal_on_node),
    )
    # The chart creates the package namespace; the earlier tests' rollouts may have.
    cluster.kubectl("delete", "namespace", PACKAGES, "--ignore-not-found", "--timeout=120s", timeout=180)
    values = chart_values(image.digest, installed.queue, installed.settings)
    helm(
        cluster,
        home,
        *install_args(installed.release, tree / "helm" / "fleetwright", installed.namespace, values),
    )
    try:
        yield installed
    finally:
        helm(
            cluster,
            home,
            "uninstall",
            installed.release,
            "-n",
            installed.namespace,
            "--ignore-not-found",
            "--wait",
        )
        cluster.kubectl(
            "delete", "namespace", installed.namespace, "--ignore-not-found", "--wait=false", check=False
        )


def images_of(cluster: LocalCluster, namespace: str) -> set[str]:
    pods = kubectl_json(cluster, "pods", "-n", namespace)["items"]
    return {
        p["spec"]["containers"][0]["image"] for p in pods if p["metadata"].get("deletionTimestamp") is None
    }


def test_helm_upgrade_mid_rollout_completes_it_under_the_new_release(
    cluster: LocalCluster,
    real_node: RealNode,
    host_root: HostRoot,
    temporal_server: LocalTemporal,
    installed_previous: PreviousRelease,
) -> None:
    previous_images = images_of(cluster, installed_previous.namespace)
    assert this_image(real_node).pinned() not in previous_images
    rollout = apply_marked_rollout(cluster, real_node, "rnu", "upgraded", STAGE_SECONDS)
    name, nodes = rollout.name, rollout.nodes
    try:
        wait_real_stage_running(cluster, real_node, name)
        # What an operator runs: the new CRDs first (Helm never changes them), then the chart.
        cluster.kubectl("apply", "-f", str(CHART / "crds"))
        helm(
            cluster,
            installed_previous.home,
            "upgrade",
            installed_previous.release,
            str(CHART),
            "-n",
            installed_previous.namespace,
            *chart_values(
                this_image(real_node).digest, installed_previous.queue, installed_previous.settings
            ),
            "--wait",
            "--timeout",
            "10m",
        )
        assert images_of(cluster, installed_previous.namespace) == {this_image(real_node).pinned()}
        # The stage that ran across the upgrade ran once.
        assert_each_stage_ran_once(cluster, host_root, rollout)
        ids = [f"nodeprofile/{name}", *(f"node/{name}/{node}" for node in nodes)]
        assert asyncio.run(_problems(temporal_server, ids)) == []
    finally:
        delete_rollout(cluster, name)


async def _problems(temporal: LocalTemporal, ids: list[str]) -> list[str]:
    client = await Client.connect(temporal.address, namespace=temporal.namespace)
    return await history_problems(client, ids)
