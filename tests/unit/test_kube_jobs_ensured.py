"""A package's ConfigMap is written once per client and content, not once per stage of every node
(the rollout benchmark counted 7 such writes per node), and trusted only for a while."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from fleetwright.kube import jobs
from fleetwright.kube.client import CONNECTION_POOL_SIZE, from_token

pytestmark = pytest.mark.unit


class FakeCore:
    """Records the calls ``ensure_*`` make; every create succeeds."""

    calls: list[str] = []

    def __init__(self, api: Any) -> None:
        self.api = api

    def create_namespaced_config_map(self, namespace: str, body: Any) -> None:
        self.calls.append(f"create configmap {namespace}/{body.metadata.name}")


@pytest.fixture
def core(monkeypatch: pytest.MonkeyPatch) -> type[FakeCore]:
    FakeCore.calls = []
    monkeypatch.setattr("fleetwright.kube.jobs.client.CoreV1Api", FakeCore)
    return FakeCore


def test_a_configmap_is_written_again_only_when_its_data_changes(core: type[FakeCore]) -> None:
    api = client.ApiClient()
    for _ in range(3):
        jobs.ensure_config_map(api, "ns", "cm", {"a": "1"}, {})
    jobs.ensure_config_map(api, "ns", "cm", {"a": "2"}, {})
    assert core.calls == ["create configmap ns/cm"] * 2


def test_what_was_ensured_is_trusted_only_for_a_while(
    core: type[FakeCore], monkeypatch: pytest.MonkeyPatch
) -> None:
    api = client.ApiClient()
    jobs.ensure_config_map(api, "ns", "cm", {"a": "1"}, {})
    monkeypatch.setattr(jobs, "ENSURED_SECONDS", 0.0)  # the trust has run out
    jobs.ensure_config_map(api, "ns", "cm", {"a": "1"}, {})
    assert core.calls == ["create configmap ns/cm"] * 2


def test_clients_pool_as_many_connections_as_the_worker_has_activity_slots(tmp_path: Any) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("")
    api = from_token("https://127.0.0.1:6443", "token", ca_cert=ca)
    assert api.configuration.connection_pool_maxsize == CONNECTION_POOL_SIZE
