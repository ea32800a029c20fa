"""The chart's RBAC as tests exercise it: the chart rendered under a release (``Installed``, with a
token per ServiceAccount), and for every rule of every role it grants, the fleetwright.kube call
that needs it (``RULES``): removing the rule must make that call fail with 403. Used against the
kwok cluster (tokens minted for the chart's ServiceAccounts) and against the real node (the
tokens the kubelet mounted into the running pods)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleetwright.api.campaign import CampaignStatus
from fleetwright.api.keys import FINALIZER
from fleetwright.api.nodeprofile import NodeProfileStatus
from fleetwright.binaries import control_plane_binary
from fleetwright.errors import ForbiddenError, NotFoundError
from fleetwright.kube import events, eviction, jobs, nodes, nodestatus, pods, resources, secrets
from fleetwright.kube.client import ApiClient, from_kubeconfig
from fleetwright.workflows.enginesettings import EngineSettings
from tests.support.providers import ClusterUnderTest
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "fleetwright"
PACKAGES = EngineSettings().package_namespace  # the chart's default package namespace
PROBE_LABEL = {"test.fleetwright.io/rbac-probe": "true"}


@dataclass
class Installed:
    """The chart rendered and applied under a unique release; tokens per ServiceAccount."""

    cluster: ClusterUnderTest
    release: str
    namespace: str
    docs: list[dict[str, Any]]
    workdir: Path

    @property
    def fullname(self) -> str:
        return f"{self.release}-fleetwright"

    def role(self, kind: str, name: str) -> dict[str, Any]:
        return next(d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name)

    def token(self, component: str) -> str:
        """A token of the component's ServiceAccount (minted here through TokenRequest)."""
        account = f"{self.fullname}-{component}"
        return self.cluster.kubectl(
            "create", "token", account, "-n", self.namespace, "--duration=2h"
        ).stdout.strip()

    def kubeconfig(self, component: str) -> Path:
        """A kubeconfig holding only the ServiceAccount's token and the cluster CA."""
        account = f"{self.fullname}-{component}"
        token = self.token(component)
        admin = yaml.safe_load(self.cluster.kubeconfig.read_text())
        cluster_entry = admin["clusters"][0]
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster_entry],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": account, "context": {"cluster": cluster_entry["name"], "user": account}}],
            "current-context": account,
        }
        path = self.workdir / f"{component}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def api(self, component: str) -> ApiClient:
        return from_kubeconfig(self.kubeconfig(component))

    def apply(self, doc: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl("apply", *extra, "-f", "-", input=json.dumps(doc))


def helm(
    cluster: ClusterUnderTest, home: Path, *args: str, timeout: float = 600, refused: bool = False
) -> subprocess.CompletedProcess[str]:
    """Helm against the cluster, its cache, configuration and data under ``home`` (never the
    user's); fails the test with Helm's output when it fails (or, ``refused``, when it does not)."""
    env = {**os.environ, **{f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}}
    done = subprocess.run(
        [str(control_plane_binary("helm")), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert (done.returncode != 0) == refused, done.stdout + done.stderr
    return done


def render(release: str, namespace: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [
            str(control_plane_binary("helm")),
            "template",
            release,
            str(CHART),
            "-n",
            namespace,
            "--include-crds",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


Operation = Callable[[ApiClient, str], object]


def _get_node(api: ApiClient, node: str) -> object:
    return nodes.get_node(api, node)


def _set_condition(api: ApiClient, node: str) -> object:
    wanted = nodestatus.NodeStatusCondition("fleetwright.io/RbacProbe", "True", "Probe", str(time.time()))
    return nodestatus.set_condition(api, node, wanted)


def _pods_on_node(api: ApiClient, node: str) -> object:
    return pods.pods_on_node(api, node)


def _delete_pod(api: ApiClient, node: str) -> object:
    return pods.delete_pod(api, "default", f"absent-{node}", grace_period_seconds=0)


def _evict(api: ApiClient, node: str) -> object:
    return eviction.evict(api, "default", f"absent-{node}")


def _ensure_config_map(api: ApiClient, node: str) -> object:
    name = f"rbac-probe-{node}"[:63]
    jobs.ensure_config_map(api, PACKAGES, name, {"k": str(time.time())}, PROBE_LABEL)
    return None


def _read_job(api: ApiClient, node: str) -> object:
    return jobs.read_job(api, PACKAGES, f"absent-{node}")


def _read_secret(api: ApiClient, node: str) -> object:
    return secrets.secret_text(api, PACKAGES, f"absent-{node}")


def _emit(api: ApiClient, node: str) -> object:
    return events.emit_for(
        api,
        api_version="v1",
        kind="Node",
        name=node,
        uid="",
        type_="Normal",
        reason="RbacProbe",
        note="RBAC test",
        key=str(time.time()),
    )


def _list_nodes(api: ApiClient, node: str) -> object:
    return nodes.list_nodes(api)


def _list_profiles(api: ApiClient, node: str) -> object:
    return resources.list_objects(api, "nodeprofiles")


def _list_campaigns(api: ApiClient, node: str) -> object:
    return resources.list_objects(api, "campaigns")


def _patch_campaign_status(api: ApiClient, node: str) -> object:
    return resources.patch_status(api, "campaigns", f"absent-{node}", CampaignStatus(phase="Pending"))


def _patch_status(api: ApiClient, node: str) -> object:
    return resources.patch_status(api, "nodeprofiles", f"absent-{node}", NodeProfileStatus(phase="Pending"))


def _remove_finalizer(api: ApiClient, node: str) -> object:
    return resources.remove_finalizer(api, "nodeprofiles", f"absent-{node}", "", FINALIZER)


def _add_finalizer(api: ApiClient, node: str) -> object:
    absent = {"metadata": {"name": f"absent-{node}", "resourceVersion": "1", "finalizers": []}}
    return resources.add_finalizer(api, "nodeprofiles", absent, FINALIZER)


def _add_runtime_taint(api: ApiClient, node: str) -> object:
    return nodes.add_runtime_taint(api, node)


def _policy_names(api: ApiClient, node: str) -> object:
    return resources.ApiResourceLookup(api).policy_names()


# (role kind, role suffix, rule index, who calls, the product's call that needs the rule)
RULES: list[tuple[str, str, int, str, Operation]] = [
    ("ClusterRole", "worker", 0, "worker", _get_node),
    ("ClusterRole", "worker", 1, "worker", _set_condition),
    ("ClusterRole", "worker", 2, "worker", _pods_on_node),
    ("ClusterRole", "worker", 3, "worker", _delete_pod),
    ("ClusterRole", "worker", 4, "worker", _evict),
    ("ClusterRole", "worker", 5, "worker", _remove_finalizer),
    ("ClusterRole", "worker", 6, "worker", _list_profiles),
    ("ClusterRole", "worker", 7, "worker", _list_campaigns),
    ("Role", "packages", 0, "worker", _ensure_config_map),
    ("Role", "packages", 1, "worker", _read_job),
    ("Role", "packages", 2, "worker", _read_secret),
    ("Role", "events", 0, "worker", _emit),
    ("ClusterRole", "controller", 0, "controller", _list_nodes),
    ("ClusterRole", "controller", 1, "controller", _list_profiles),
    ("ClusterRole", "controller", 2, "controller", _patch_status),
    ("ClusterRole", "controller", 3, "controller", _add_finalizer),
    ("ClusterRole", "controller", 4, "controller", _add_runtime_taint),
    ("ClusterRole", "controller", 5, "controller", _list_campaigns),
    ("ClusterRole", "controller", 6, "controller", _patch_campaign_status),
    ("ClusterRole", "webhook", 0, "webhook", _policy_names),
]


def forbidden(operation: Operation, api: ApiClient, node: str) -> bool:
    try:
        operation(api, node)
    except ForbiddenError:
        return True
    except NotFoundError:
        pass  # authorised; the object is just absent
    return False


RuleCase = tuple[str, str, int, str, Operation]
RULE_IDS = [f"{k}-{r}-{i}-{op.__name__.lstrip('_')}" for k, r, i, _, op in RULES]


def assert_rule_is_needed(installed: Installed, probe_node: str, case: RuleCase) -> None:
    """The call works with the full role, fails with 403 once the rule is removed, and works
    again once it is restored."""
    kind, role, index, caller, operation = case
    api = installed.api(caller)
    full = installed.role(kind, f"{installed.fullname}-{role}")
    assert not forbidden(operation, api, probe_node), f"{operation.__name__} is forbidden with the full role"
    reduced = json.loads(json.dumps(full))
    removed = reduced["rules"].pop(index)
    installed.apply(reduced)
    try:
        wait_for(lambda: forbidden(operation, api, probe_node), 20.0, f"403 without {removed}", interval=0.3)
    finally:
        installed.apply(full)
        wait_for(lambda: not forbidden(operation, api, probe_node), 20.0, "the role restored", interval=0.3)


WORKER_RELEASE, WORKER_NAMESPACE = "fw", "fleetwright"


def worker_identity(cluster: ClusterUnderTest) -> None:
    """The chart's worker ServiceAccount with its roles and bindings alone, applied in ``cluster``
    (a campaign member: nothing else of the chart runs there)."""
    docs = render(WORKER_RELEASE, WORKER_NAMESPACE)
    account = f"{WORKER_RELEASE}-fleetwright-worker"
    bindings = [
        d
        for d in docs
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
        and any(s["name"] == account for s in d.get("subjects") or [])
    ]
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace")) for b in bindings}
    roles = [d for d in docs if (d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) in bound]
    account_doc = next(d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == account)
    cluster.kubectl("create", "namespace", WORKER_NAMESPACE)
    for doc in [account_doc, *roles, *bindings]:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))


def worker_kubeconfig(cluster: ClusterUnderTest, workdir: Path) -> Path:
    """A kubeconfig of a fresh token of the worker ServiceAccount ``worker_identity`` applied."""
    workdir.mkdir(parents=True, exist_ok=True)
    return Installed(cluster, WORKER_RELEASE, WORKER_NAMESPACE, [], workdir).kubeconfig("worker")
