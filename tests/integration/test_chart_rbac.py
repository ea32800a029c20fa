"""The Helm chart against the real kube-apiserver: its rendered manifests apply; the worker and
controller, authenticated only as the chart's ServiceAccounts (their tokens), complete a rollout;
and every rule of every role the chart grants is needed: removing it makes a named fleetwright.kube
call fail with 403."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from fleetwright.api.keys import FINALIZER
from fleetwright.kube import resources
from fleetwright.local.kubectl import wait_established
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.settings import WorkerSettings
from fleetwright.worker.main import run_worker
from tests.support.chartrbac import (
    PACKAGES,
    RULES,
    Installed,
    RuleCase,
    assert_rule_is_needed,
    render,
)
from tests.support.engine import unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import Rollout, RunningController, engine_settings
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(cluster: ClusterUnderTest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    release, namespace = unique("fwc"), unique("fwc-system")
    docs = render(release, namespace)
    here = Installed(cluster, release, namespace, docs, tmp_path_factory.mktemp("chart"))
    # The operator's own namespace enforces the restricted Pod Security profile: its pods need nothing.
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    # A webhook whose pods never run (no scheduler here) must not gate the shared cluster's CRs:
    # the webhook configurations are checked by a server-side dry run only.
    webhooks = [d for d in docs if d["kind"] in WEBHOOK_KINDS]
    rest = [d for d in docs if d not in crds and d not in webhooks]
    try:
        here.apply({"apiVersion": "v1", "kind": "List", "items": crds})
        wait_established(cluster.kubectl, [crd["metadata"]["name"] for crd in crds])
        here.apply({"apiVersion": "v1", "kind": "List", "items": rest})
        for webhook in webhooks:
            here.apply(webhook, "--dry-run=server")
        yield here
    finally:
        selector = f"app.kubernetes.io/instance={release}"
        cluster.kubectl(
            "delete",
            "clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
            "-l",
            selector,
            check=False,
        )
        for ns in ("default", PACKAGES):
            cluster.kubectl("delete", "role,rolebinding", "-n", ns, "-l", selector, check=False)
        cluster.kubectl(
            "delete", "configmap", "-n", PACKAGES, "-l", "test.fleetwright.io/rbac-probe", check=False
        )
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_the_rendered_manifests_apply(installed: Installed, cluster: ClusterUnderTest) -> None:
    kinds = {d["kind"] for d in installed.docs}
    assert {"Deployment", "PodDisruptionBudget", "ClusterRole", *WEBHOOK_KINDS} <= kinds
    ns = installed.namespace
    listed = json.loads(cluster.kubectl("get", "deploy,pdb,svc,secret,sa,cm", "-n", ns, "-o", "json").stdout)
    names = {f"{i['kind']}/{i['metadata']['name']}" for i in listed["items"]}
    full = installed.fullname
    for component in ("worker", "controller", "webhook"):
        assert f"Deployment/{full}-{component}" in names
        assert f"PodDisruptionBudget/{full}-{component}" in names
        assert f"ServiceAccount/{full}-{component}" in names
    assert {f"Service/{full}-webhook", f"Secret/{full}-webhook-tls", f"ConfigMap/{full}-settings"} <= names
    labels = json.loads(cluster.kubectl("get", "namespace", PACKAGES, "-o", "json").stdout)["metadata"][
        "labels"
    ]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    # The restricted profile (enforced on the release namespace) admits the operator's own pods,
    # the embedded Temporal's (the default, with no Temporal address) among them.
    assert f"Deployment/{full}-temporal" in names
    for component in ("worker", "controller", "webhook", "temporal"):
        template = installed.role("Deployment", f"{full}-{component}")["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"probe-{component}", "namespace": ns}}
        done = installed.apply({**pod, "spec": template["spec"]}, "--dry-run=server")
        assert "violate" not in done.stderr, done.stderr


# ----- a whole rollout as the chart's ServiceAccounts ----------------------------------------------


@pytest.fixture
async def as_service_accounts(
    installed: Installed, temporal_server: LocalTemporal
) -> AsyncIterator[WorkerSettings]:
    queue = unique("chart")
    base = {
        "temporal_address": temporal_server.address,
        "temporal_namespace": temporal_server.namespace,
        "task_queue": queue,
        "engine": engine_settings(),
    }
    worker_settings = WorkerSettings(**base, kubeconfig=installed.kubeconfig("worker"))
    controller_settings = WorkerSettings(**base, kubeconfig=installed.kubeconfig("controller"))
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(worker_settings, stop))
    controller = RunningController(controller_settings)
    controller.start()
    try:
        yield controller_settings
    finally:
        await controller.stop()
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker, timeout=30)


async def test_worker_and_controller_as_the_charts_service_accounts_complete_a_rollout(
    installed: Installed, as_service_accounts: WorkerSettings, rollout: Rollout, crds: None
) -> None:
    await asyncio.to_thread(rollout.apply)
    await asyncio.to_thread(rollout.wait_ready, 150)
    status = await asyncio.to_thread(rollout.status)
    assert status["phase"] == "Complete"
    assert status["progress"] == "3/3"
    assert await asyncio.to_thread(rollout.recorded_versions) == {"1.0.0"}
    reasons = await asyncio.to_thread(rollout.event_reasons)
    assert "RolloutStarted" in reasons  # the controller's Events, written with its own token


# ----- every rule is needed ------------------------------------------------------------------------


def test_every_rule_the_chart_grants_is_covered(installed: Installed) -> None:
    granted = {
        (d["kind"], d["metadata"]["name"].removeprefix(f"{installed.fullname}-"), i)
        for d in installed.docs
        if d["kind"] in ("ClusterRole", "Role")
        for i in range(len(d["rules"]))
    }
    assert granted == {(kind, role, index) for kind, role, index, _, _ in RULES}


def test_removing_a_rule_makes_its_operation_forbidden(
    installed: Installed, probe_node: str, rule_case: RuleCase
) -> None:
    assert_rule_is_needed(installed, probe_node, rule_case)


def test_the_operators_own_accounts_cannot_change_a_profile_spec(
    installed: Installed, cluster: ClusterUnderTest, crds: None
) -> None:
    name = unique("guarded")
    profile = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "NodeProfile",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"matchLabels": {"test.fleetwright.io/nothing": name}},
            "packages": [{"name": "tuning", "version": "1.0.0", "image": "ghcr.io/example/tuning"}],
        },
    }
    installed.apply(profile)
    controller, worker = installed.api("controller"), installed.api("worker")
    custom = k8s.CustomObjectsApi(controller)
    attempts: list[str] = []
    denials: list[str] = []

    def spec_write_denied() -> bool:
        # A fresh value each time: were the guard not in effect yet, a repeated change would be a
        # no-op the guard rightly allows.
        attempts.append(f"else-{len(attempts)}")
        change = {"spec": {"nodeSelector": {"matchLabels": {"test.fleetwright.io/nothing": attempts[-1]}}}}
        try:
            custom.patch_cluster_custom_object("fleetwright.io", "v1alpha1", "nodeprofiles", name, change)
        except ApiException as error:
            denials.append(str(error.body))
            return True
        return False

    try:
        wait_for(spec_write_denied, 20.0, "the spec guard to deny the controller", interval=0.3)
        assert "never its spec" in denials[0], denials[0]
        obj = resources.get_object(worker, "nodeprofiles", name)
        assert obj["spec"]["nodeSelector"]["matchLabels"]["test.fleetwright.io/nothing"] != attempts[-1]
        # What the accounts legitimately do still works: the finalizer, both ways.
        resources.add_finalizer(controller, "nodeprofiles", obj, FINALIZER)
        assert resources.remove_finalizer(worker, "nodeprofiles", name, obj["metadata"]["uid"], FINALIZER)
    finally:
        cluster.kubectl("delete", "nodeprofile", name, "--ignore-not-found", check=False)


EXAMPLE_RBAC = REPO / "deploy" / "rbac" / "nodeprofile-authors.yaml"


def _can(cluster: ClusterUnderTest, verb: str, resource: str, group: str) -> bool:
    done = cluster.kubectl(
        "auth",
        "can-i",
        verb,
        f"{resource}.fleetwright.io",
        "--as=someone",
        f"--as-group={group}",
        check=False,
    )
    return done.stdout.strip() == "yes"


def test_the_example_rbac_keeps_profile_authoring_to_fleet_admins(
    cluster: ClusterUnderTest, crds: None
) -> None:
    cluster.kubectl("apply", "-f", str(EXAMPLE_RBAC))
    try:
        assert _can(cluster, "create", "nodeprofiles", "fleet-admins")
        assert _can(cluster, "update", "nodeprofiles", "fleet-admins")
        assert not _can(cluster, "create", "nodeprofiles", "fleet-rollout-leads")
        assert not _can(cluster, "patch", "nodeprofiles", "fleet-rollout-leads")
        assert _can(cluster, "create", "deploymentpolicies", "fleet-rollout-leads")
        assert _can(cluster, "get", "nodeprofiles", "fleet-rollout-leads")
        assert not _can(cluster, "get", "nodeprofiles", "someone-else")
        # (The viewer role reaches "view" through the ClusterRole aggregation controller, which the
        # local control plane does not run.)
    finally:
        cluster.kubectl("delete", "-f", str(EXAMPLE_RBAC), "--ignore-not-found", check=False)
