"""Pure parts of the local control plane: node manifests, PKI, binary lookup, providers, the
PostgreSQL-backed Temporal server's configuration."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509

from fleetwright.binaries import MissingBinaryError, control_plane_binary
from fleetwright.local import nodes
from fleetwright.local.controlplane import ClusterOptions, node_monitor_grace
from fleetwright.local.kwok import kwok_configuration
from fleetwright.local.pki import LocalCA
from fleetwright.local.postgres import LocalPostgres
from fleetwright.local.stack import LocalStack, StackOptions
from fleetwright.local.temporalserver import STORES, Backend, local_temporal, server_config
from fleetwright.workflows.enginesettings import EngineSettings
from tests.support import providers

pytestmark = pytest.mark.unit


def test_node_manifests_are_deterministic_and_labelled() -> None:
    first, again = nodes.fleet(20), nodes.fleet(20)
    assert first == again
    names = [n["metadata"]["name"] for n in first]
    assert len(set(names)) == 20
    racks = {n["metadata"]["labels"][nodes.RACK_LABEL] for n in first}
    assert racks == {"rack-000", "rack-001", "rack-002"}
    assert all(n["metadata"]["annotations"][nodes.KWOK_ANNOTATION] == "fake" for n in first)


def test_kwok_keeps_its_defaults_for_small_fleets_and_grows_its_workers_with_large_ones() -> None:
    assert kwok_configuration(24) is None
    assert kwok_configuration(128) is None
    fleet = kwok_configuration(1000)
    assert fleet is not None
    options = fleet["options"]
    # 32 lease workers renew 1,000 leases inside the grace period on 2 loaded cores (benchmarked).
    assert options["nodeLeaseParallelism"] == 32
    assert options["nodePlayStageParallelism"] == options["podPlayStageParallelism"] == 16
    # kwok does not default a file's configuration: the kubelet endpoint must keep serving logs.
    assert options["enableDebuggingHandlers"] is True
    assert options["podsOnNodeSyncParallelism"] == 1
    large = kwok_configuration(10_000)
    assert large is not None
    assert large["options"]["nodeLeaseParallelism"] == 313


def test_a_lease_longer_than_the_default_stretches_the_node_monitor_grace_period_past_it() -> None:
    assert node_monitor_grace(40) == ()
    assert node_monitor_grace(240) == ("--node-monitor-grace-period=300s",)
    assert node_monitor_grace(1200) == ("--node-monitor-grace-period=1260s",)


def test_boot_ids_differ_per_node_and_generation() -> None:
    ids = {nodes.boot_id(nodes.node_name(i), g) for i in range(50) for g in range(3)}
    assert len(ids) == 150


def test_local_ca_issues_certificates_that_verify(tmp_path: Path) -> None:
    ca = LocalCA(tmp_path)
    server = ca.issue("srv", common_name="kube-apiserver", ip_addresses=("127.0.0.1",), server=True)
    client = ca.issue("adm", common_name="admin", organization="system:masters")
    cert = x509.load_pem_x509_certificate(server.cert.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.pem))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    subject = x509.load_pem_x509_certificate(client.cert.read_bytes()).subject.rfc4514_string()
    assert "O=system:masters" in subject
    assert "CN=admin" in subject
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    context.load_cert_chain(str(client.cert), str(client.key))  # key matches certificate
    assert oct(server.key.stat().st_mode & 0o777) == "0o600"


def test_missing_binary_names_the_setup_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETWRIGHT_CACHE", str(tmp_path))
    with pytest.raises(MissingBinaryError, match=r"etcd not found .*tools/setup\.sh"):
        control_plane_binary("etcd")


def test_k3s_provider_reports_itself_unavailable_without_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    reason = providers.docker_unavailable_reason()
    assert reason is not None
    assert "Docker" in reason
    with pytest.raises(providers.ProviderUnavailableError, match="k3s provider unavailable"):
        providers.start_cluster("k3s")


def test_unknown_provider_is_an_error() -> None:
    with pytest.raises(providers.ProviderUnavailableError, match="expected 'local' or 'k3s'"):
        providers.start_cluster("minikube")


def test_the_postgres_server_config_uses_both_stores_on_loopback_with_ringpop_ports_in_a_smallint(
    tmp_path: Path,
) -> None:
    database = LocalPostgres(tmp_path / "postgres")
    config = server_config(
        database, frontend_port=41000, metrics_port=41001, shards=4, dynamic_config=tmp_path / "dynamic.yaml"
    )
    assert config["dynamicConfigClient"]["filepath"] == str(tmp_path / "dynamic.yaml")
    stores = config["persistence"]["datastores"]
    assert set(stores) == {config["persistence"]["defaultStore"], config["persistence"]["visibilityStore"]}
    assert {s["sql"]["databaseName"] for s in stores.values()} == {s.database for s in STORES}
    assert all(s["sql"]["pluginName"] == "postgres12" for s in stores.values())
    assert all(s["sql"]["connectAddr"] == f"127.0.0.1:{database.port}" for s in stores.values())
    rpcs = [service["rpc"] for service in config["services"].values()]
    assert config["services"]["frontend"]["rpc"]["grpcPort"] == 41000
    assert all(rpc["bindOnIP"] == "127.0.0.1" for rpc in rpcs)
    assert config["global"]["metrics"]["prometheus"]["listenAddress"] == "127.0.0.1:41001"
    # The schema's cluster_membership.rpc_port is a SMALLINT: a member above 32767 cannot join.
    assert all(20000 <= rpc["membershipPort"] < 32768 for rpc in rpcs)


def test_only_the_dev_server_has_a_web_ui() -> None:
    with pytest.raises(ValueError, match="no Web UI"):
        local_temporal(Backend.POSTGRES, ui=True)


@pytest.mark.parametrize("gpu_metrics", [True, False])
def test_the_stacks_worker_queries_the_stacks_prometheus(tmp_path: Path, gpu_metrics: bool) -> None:
    options = StackOptions(
        cluster=ClusterOptions(),
        workdir=tmp_path,
        engine=EngineSettings(),
        ui=False,
        webhook=False,
        gpu_metrics=gpu_metrics,
    )
    stack = LocalStack(options)  # nothing starts before it is entered
    url = stack.settings(EngineSettings()).prometheus_url
    assert url == (stack.gpu_metrics.url if stack.gpu_metrics is not None else "")
    assert url.startswith("http://127.0.0.1:") is gpu_metrics


@pytest.mark.parametrize("registry", [True, False])
def test_the_stacks_worker_trusts_the_stacks_registry(tmp_path: Path, registry: bool) -> None:
    options = StackOptions(
        cluster=ClusterOptions(),
        workdir=tmp_path,
        ui=False,
        webhook=False,
        gpu_metrics=False,
        registry=registry,
    )
    stack = LocalStack(options)  # nothing starts before it is entered
    ca_file = stack.settings(EngineSettings()).registry_ca_file
    assert ca_file == (str(stack.registry.ca_file) if stack.registry is not None else "")
    assert bool(ca_file) is registry
