"""``helm install`` of the chart with the image this checkout builds, on the real node: the worker,
controller and webhook run as real pods of the fleetwright image, admission goes through the
in-cluster webhook (the apiserver reaches its pod through the node link), a rollout over kwok nodes
and the real node is driven entirely by the in-cluster processes (Temporal reached at the node's
address), every RBAC rule is needed by the very tokens the kubelet mounted into those pods, and
``helm uninstall`` leaves nothing behind. The image ships the runtime only: no lab module, every
other module imports, and a lab command refuses to run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from fleetwright import lab
from fleetwright.cli.commands import LAB_COMMAND_MODULES, not_shipped
from fleetwright.images import spec as image_spec
from fleetwright.local import realnode
from fleetwright.local.controlplane import LocalCluster
from fleetwright.local.realnode import RealNode
from fleetwright.packagetest.hostroot import HostRoot
from tests.support.chartinstall import (
    built,
    chart_values,
    install_args,
    uninstall_keeping_the_package_namespace,
)
from tests.support.chartrbac import (
    CHART,
    PACKAGES,
    Installed,
    RuleCase,
    assert_rule_is_needed,
    helm,
)
from tests.support.engine import kubectl_json, unique
from tests.support.realnode import (
    apply_rollout,
    delete_rollout,
    group,
    marker_of,
    marking_scripts,
    shellscript,
    wait_complete,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.node, pytest.mark.timeout(1200)]

COMPONENTS = ("worker", "controller", "webhook")
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# Run by the image's python3: every module of the installed fleetwright package (from its files, so
# a package that fails to import is still listed), each imported in this one process but the
# ``__main__`` modules and those named as arguments; the last line is JSON.
MODULES_PROBE = """
import importlib, json, pathlib, sys
import fleetwright
root = pathlib.Path(fleetwright.__path__[0])
names = sorted(
    ".".join(("fleetwright", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
    for p in root.rglob("*.py")
)
failed = {}
for name in names:
    if name.endswith(".__main__") or name in sys.argv[1:]:
        continue
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = f"{type(error).__name__}: {error}"
print(json.dumps({"modules": names, "failed": failed}))
"""


@dataclass
class InCluster(Installed):
    """The installed release, its ServiceAccounts' tokens read from inside their running pods."""

    def pod(self, component: str) -> str:
        listed = kubectl_json(
            self.cluster, "pods", "-n", self.namespace, "-l", f"app.kubernetes.io/component={component}"
        )
        return str(listed["items"][0]["metadata"]["name"])

    def token(self, component: str) -> str:
        done = self.cluster.kubectl("exec", "-n", self.namespace, self.pod(component), "--", "cat", TOKEN)
        return done.stdout.strip()


@pytest.fixture(scope="module")
def installed(
    cluster: LocalCluster,
    real_node: RealNode,
    temporal_on_node: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[InCluster]:
    name, namespace = unique("fwr"), unique("fwr-system")
    home = tmp_path_factory.mktemp("helm")
    # The chart creates the package namespace; the rollout tests' in-process worker may have.
    cluster.kubectl("delete", "namespace", PACKAGES, "--ignore-not-found", "--timeout=120s", timeout=180)
    settings = realnode.chart_settings(real_node, temporal_on_node)
    digest = built(real_node, image_spec.FLEETWRIGHT).digest
    helm(
        cluster, home, *install_args(name, CHART, namespace, chart_values(digest, unique("chart"), settings))
    )
    manifest = helm(cluster, home, "get", "manifest", name, "-n", namespace).stdout
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    try:
        yield InCluster(cluster, name, namespace, docs, home)
    finally:
        helm(cluster, home, "uninstall", name, "-n", namespace, "--ignore-not-found", "--wait")
        cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False)


def test_the_chart_runs_on_the_real_node_admits_through_its_webhook_and_completes_a_rollout(
    cluster: LocalCluster, real_node: RealNode, host_root: HostRoot, installed: InCluster
) -> None:
    image = built(real_node, image_spec.FLEETWRIGHT)
    pods = kubectl_json(cluster, "pods", "-n", installed.namespace)["items"]
    assert sorted(p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pods) == sorted(
        [c for c in COMPONENTS for _ in range(2)]
    )
    for pod in pods:
        assert pod["spec"]["nodeName"] == real_node.options.name
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", pod["metadata"]["name"]
        (status,) = pod["status"]["containerStatuses"]
        assert status["containerID"].startswith("containerd://")
        # The image this checkout built, pinned by its digest.
        assert pod["spec"]["containers"][0]["image"] == image.pinned()
    # Pulled from the registry the README's install pushed it to: containerd holds it under the
    # registry's name, which only a pull gives (the node imports nothing but the sandbox image).
    assert image.pinned() in real_node.image_refs()

    # Admission: a version that is not semver passes the CRD schema; only the webhook rejects it.
    bad = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "NodeProfile",
        "metadata": {"name": unique("bad")},
        "spec": {
            "allNodes": True,
            "packages": [{"name": "p", "version": "1.2", "image": shellscript(real_node).repository}],
        },
    }
    denied = cluster.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert denied.returncode != 0
    # The webhook's own message (CEL has no semver rule), and the release's is the only webhook.
    assert "spec.packages[0].version: '1.2' is not a semantic version" in denied.stderr
    webhooks = kubectl_json(cluster, "validatingwebhookconfigurations")["items"]
    assert [w["metadata"]["name"] for w in webhooks] == [installed.fullname]

    # A rollout driven only by the in-cluster worker and controller.
    name = unique("rnc")
    nodes = group(cluster, real_node, name, 2)
    marker = marker_of(name)
    apply_rollout(cluster, name, marking_scripts(marker, "in-cluster"))
    try:
        wait_complete(cluster, name)
        assert host_root.read(marker) == "in-cluster\n"
        status = kubectl_json(cluster, "nodeprofile", name)["status"]
        assert status["phase"] == "Complete"
        assert status["progress"] == f"{len(nodes)}/{len(nodes)}"
    finally:
        delete_rollout(cluster, name)


def test_the_image_ships_the_runtime_only_and_refuses_the_lab_commands(
    cluster: LocalCluster, installed: InCluster
) -> None:
    exec_in_worker = ("exec", "-n", installed.namespace, installed.pod("worker"), "--")
    # The CLI's lab command modules stay in the image (it names them), unimported without the lab.
    lab_commands = [f"fleetwright.cli.{name}" for name in sorted(LAB_COMMAND_MODULES)]
    probe = cluster.kubectl(*exec_in_worker, "python3", "-c", MODULES_PROBE, *lab_commands, timeout=300)
    found = json.loads(probe.stdout.splitlines()[-1])
    modules: list[str] = found["modules"]
    assert {"fleetwright.lab", "fleetwright.worker.temporalworker", *lab_commands} <= set(modules)
    shipped_lab = [m for m in modules if any(m == n or m.startswith(f"{n}.") for n in lab.MODULES)]
    assert shipped_lab == []
    assert found["failed"] == {}

    refused = cluster.kubectl(*exec_in_worker, "fleetwright", "cluster", "up", check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert not_shipped("cluster") in refused.stderr


def test_every_rule_is_needed_by_the_tokens_the_kubelet_mounted(
    installed: InCluster, probe_node: str, rule_case: RuleCase
) -> None:
    assert_rule_is_needed(installed, probe_node, rule_case)


def test_helm_uninstall_leaves_nothing(
    cluster: LocalCluster, real_node: RealNode, installed: InCluster
) -> None:
    """Nothing of the release is left but what the chart keeps on purpose: the CRDs (Helm never
    deletes them) and the package namespace with its stage Jobs, kept for their logs until the
    operator deletes it."""
    uninstall_keeping_the_package_namespace(
        cluster, installed.workdir, installed.release, installed.namespace
    )
    cluster.kubectl("delete", "namespace", PACKAGES, "--wait=false")
    # The pods stop gracefully (SIGTERM, exit 0) after helm returns; the real kubelet confirms.
    wait_for(
        lambda: not _leftovers(cluster, installed.namespace),
        180,
        "nothing of the release left after uninstall",
        interval=1,
        details=lambda: f"still there: {_leftovers(cluster, installed.namespace)}",
    )
    on_node = kubectl_json(
        cluster, "pods", "-A", "--field-selector", f"spec.nodeName={real_node.options.name}"
    )
    assert on_node["items"] == []


def _leftovers(cluster: LocalCluster, namespace: str) -> list[str]:
    items = kubectl_json(cluster, "all", "-n", namespace)["items"]
    names = [f"{namespace}/{i['kind']}/{i['metadata']['name']}" for i in items]
    if cluster.kubectl("get", "namespace", PACKAGES, check=False).returncode == 0:
        pods = kubectl_json(cluster, "pods", "-n", PACKAGES)["items"]
        names += [f"namespace {PACKAGES}", *(f"{PACKAGES}/pod/{p['metadata']['name']}" for p in pods)]
    return names
