"""The runtime-required taint at admission, on the real apiserver: with an ``autoTaintNewNodes``
profile, every joining node it targets is stored tainted, so a watch opened before the nodes are
created never sees one of them untainted (reacting to the ADDED event left six of six nodes Ready
and untainted for 17-121 ms). With the webhook down, nodes still register (failurePolicy Ignore)."""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwright import certs
from fleetwright.api.keys import RUNTIME_REQUIRED_TAINT
from fleetwright.kube.client import from_kubeconfig
from fleetwright.kube.listwatch import ListWatch, WatchEvent, start_thread
from fleetwright.kube.resources import ApiResourceLookup
from fleetwright.local import examples
from fleetwright.local import nodes as fleet_nodes
from fleetwright.webhook.admission import node_webhook_configuration
from fleetwright.webhook.server import MUTATE_PATH, WebhookServer
from tests.support.engine import unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL
from tests.support.waiting import until

pytestmark = pytest.mark.integration

CONFIG = "fleetwright-node-admission-test"


@pytest.fixture
def node_webhook(cluster: ClusterUnderTest, crds: None, tmp_path: Path) -> Iterator[WebhookServer]:
    """The webhook server in this process, registered for Node CREATE as the chart registers it."""
    bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=["127.0.0.1"])
    paths = certs.write_bundle(bundle, tmp_path / "tls")
    lookup = ApiResourceLookup(from_kubeconfig(cluster.kubeconfig))
    server = WebhookServer(lookup, cert_file=paths["tls.crt"], key_file=paths["tls.key"]).start()
    config = node_webhook_configuration(
        ca_bundle=bundle.ca_bundle, url=server.base_url + MUTATE_PATH, name=CONFIG
    )
    cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
    try:
        yield server
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", CONFIG, "--ignore-not-found", check=False)
        server.stop()


def runtime_profile(cluster: ClusterUnderTest, group: str) -> str:
    name = unique("taint")
    body = examples.profile(name, selector={GROUP_LABEL: group}).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    body.pop("status", None)
    body["metadata"] = {"name": name}
    body["spec"].pop("deploymentPolicyRef", None)
    body["spec"]["runtimeRequired"] = True
    body["spec"]["autoTaintNewNodes"] = True
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    return name


def manifests(group: str, count: int) -> list[dict[str, Any]]:
    first = random.randint(20_000, 40_000)  # clear of add_nodes's sequence and of other tests
    return [fleet_nodes.node_manifest(first + i, extra_labels={GROUP_LABEL: group}) for i in range(count)]


def admitted_tainted(cluster: ClusterUnderTest, group: str) -> bool:
    """A server-side dry run of a targeted node comes back with the taint (the webhook is in effect)."""
    [probe] = manifests(group, 1)
    done = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe), check=False
    )
    return done.returncode == 0 and RUNTIME_REQUIRED_TAINT in done.stdout


class NodeWatch:
    """Every view of the group's nodes (the adapter's list+watch), opened before any of them exists."""

    def __init__(self, cluster: ClusterUnderTest, group: str) -> None:
        self.views: list[tuple[str, str, list[str], bool]] = []
        self.listed = threading.Event()
        self._stop = threading.Event()
        api = from_kubeconfig(cluster.kubeconfig)
        start_thread(
            ListWatch(api, "nodes", self._deliver, self._stop, label_selector=f"{GROUP_LABEL}={group}")
        )

    def _deliver(self, event: WatchEvent) -> None:
        for node in event.items if event.type == "SYNC" else [event.obj] if event.obj else []:
            taints = [t.get("key") for t in (node.get("spec") or {}).get("taints") or []]
            conditions = (node.get("status") or {}).get("conditions") or []
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            self.views.append((event.type, node["metadata"]["name"], taints, ready))
        self.listed.set()

    def ready(self) -> set[str]:
        return {name for _, name, _, is_ready in self.views if is_ready}

    def stop(self) -> None:
        self._stop.set()


async def test_no_joining_node_is_ever_observed_untainted(
    cluster: ClusterUnderTest, node_webhook: WebhookServer
) -> None:
    group = unique("join")
    profile = runtime_profile(cluster, group)
    joining = manifests(group, 6)
    names = {m["metadata"]["name"] for m in joining}
    try:
        await until(lambda: admitted_tainted(cluster, group), 30, "the Node webhook to be in effect")
        observed = NodeWatch(cluster, group)
        assert observed.listed.wait(30)
        assert observed.views == [], "the group's nodes must not exist yet"
        cluster.kubectl(
            "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": joining})
        )
        await until(lambda: observed.ready() >= names, 60, "the nodes Ready")
        observed.stop()
        assert {name for _, name, _, _ in observed.views} == names
        first = {name: kind for kind, name, _, _ in reversed(observed.views)}
        assert set(first.values()) == {"ADDED"}, "the watch must see each node from its creation"
        untainted = [
            (kind, name) for kind, name, taints, _ in observed.views if RUNTIME_REQUIRED_TAINT not in taints
        ]
        assert untainted == [], f"seen without the taint: {untainted}"
    finally:
        cluster.kubectl("delete", "nodeprofile", profile, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "node", *names, "--ignore-not-found", "--wait=false", check=False)


async def test_nodes_still_join_while_the_webhook_is_down(
    cluster: ClusterUnderTest, node_webhook: WebhookServer
) -> None:
    group = unique("down")
    profile = runtime_profile(cluster, group)
    [joining] = manifests(group, 1)
    name = joining["metadata"]["name"]
    try:
        await until(lambda: admitted_tainted(cluster, group), 30, "the Node webhook to be in effect")
        node_webhook.stop()
        created = cluster.kubectl("create", "-f", "-", input=json.dumps(joining), check=False)
        assert created.returncode == 0, created.stderr
        stored = json.loads(cluster.kubectl("get", "node", name, "-o", "json").stdout)
        assert RUNTIME_REQUIRED_TAINT not in [t["key"] for t in stored["spec"].get("taints") or []]
    finally:
        cluster.kubectl("delete", "nodeprofile", profile, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false", check=False)
