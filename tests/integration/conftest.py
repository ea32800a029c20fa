"""Fixtures for the integration tier's running stack (see ``tests/support/stack.py``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest
from temporalio.client import Client

from fleetwright.local.ociregistry import LocalRegistry
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.local.trainingoperator import TrainingOperator
from fleetwright.process.settings import WorkerSettings
from fleetwright.registry import RegistryAccess
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.ids import rollout_workflow_id
from tests.support.chartrbac import RULE_IDS, RULES, Installed, RuleCase
from tests.support.engine import engine_worker, label_nodes, simulated_kubelet, unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import GROUP_LABEL, Rollout, RunningController, engine_settings, install_crds


@pytest.fixture(scope="session")
def oci_registry() -> Iterator[LocalRegistry]:
    """The local OCI registry (docker-registry on loopback, TLS from its own local CA)."""
    with LocalRegistry() as registry:
        yield registry


@pytest.fixture(scope="module")
def crds(cluster: ClusterUnderTest) -> None:
    install_crds(cluster)


@pytest.fixture
async def gang_engine(cluster: ClusterUnderTest, temporal_client: Client) -> AsyncIterator[str]:
    """An in-process worker with the real activities (``engine_worker``) on its own task queue, for
    the modules that roll over a gang (``tests/support/gangjobs.py``); yields the queue."""
    async with engine_worker(cluster, temporal_client, "gang") as queue:
        yield queue


@pytest.fixture(scope="module")
def training_operator(cluster: ClusterUnderTest) -> Iterator[TrainingOperator]:
    """The Kubeflow training operator, its PyTorchJob controller and CRD only, for the modules whose
    gangs it runs (started only for them: it watches every namespace)."""
    with TrainingOperator(cluster.kubeconfig, cluster.kubectl, jobs=("pytorchjobs",)) as operator:
        yield operator


@pytest.fixture
def registry_access() -> RegistryAccess | None:
    """How the ``worker`` fixture's image pinning reaches registries (None: the defaults; the node
    tier's trusts its real node's registry)."""
    return None


@pytest.fixture
async def worker(
    cluster: ClusterUnderTest, temporal_client: Client, registry_access: RegistryAccess | None
) -> AsyncIterator[str]:
    """An in-process worker with the real activities (``engine_worker``: stage waits on the shared
    Job watch, as in the worker process) on its own task queue; yields the queue."""
    async with engine_worker(cluster, temporal_client, "ctl", registry=registry_access) as queue:
        yield queue


@pytest.fixture(scope="module")
def probe_node(installed: Installed) -> str:
    """A node of its own for the chart's RBAC rule probes (``tests.support.chartrbac``), in the
    modules that install the chart as ``installed``."""
    (node,) = installed.cluster.add_nodes(1)
    return node


@pytest.fixture(params=RULES, ids=RULE_IDS)
def rule_case(request: pytest.FixtureRequest) -> RuleCase:
    """Each rule the chart grants, for a test that shows it needed (``assert_rule_is_needed``)."""
    case: RuleCase = request.param
    return case


@pytest.fixture
def engine() -> EngineSettings:
    """The rollout engine's settings for the controller fixture (the node tier points stage pods
    at its real node's scratch host root)."""
    return engine_settings()


@contextlib.asynccontextmanager
async def running_controller(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, worker: str, engine: EngineSettings
) -> AsyncIterator[RunningController]:
    settings = WorkerSettings(
        temporal_address=temporal_server.address,
        temporal_namespace=temporal_server.namespace,
        task_queue=worker,
        kubeconfig=cluster.kubeconfig,
        engine=engine,
    )
    running = RunningController(settings)
    running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def controller(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, worker: str, crds: None, engine: EngineSettings
) -> AsyncIterator[RunningController]:
    async with running_controller(cluster, temporal_server, worker, engine) as running:
        yield running


@pytest.fixture
async def failing_controller(
    cluster: ClusterUnderTest, temporal_server: LocalTemporal, worker: str, crds: None
) -> AsyncIterator[RunningController]:
    """A controller whose rollouts run every stage pod as a failing one (the simulated fleet reads
    the outcome label)."""
    engine = engine_settings().model_copy(update={"stage_pod_labels": {"sim.fleetwright.io/outcome": "fail"}})
    async with running_controller(cluster, temporal_server, worker, engine) as running:
        yield running


@pytest.fixture
async def rollout(
    cluster: ClusterUnderTest, temporal_client: Client, request: pytest.FixtureRequest
) -> AsyncIterator[Rollout]:
    """A profile and policy on three nodes of their own; parametrized indirectly with a length, the
    profile's name is that long."""
    name = unique("ctl")
    length: int | None = getattr(request, "param", None)
    if length is not None:
        name = f"{name}-{'x' * length}"[:length]
    nodes = await asyncio.to_thread(cluster.add_nodes, 3)
    await asyncio.to_thread(label_nodes, cluster, nodes, f"{GROUP_LABEL}={name}")
    policy = {
        "max_unavailable": 2,
        "steps": [
            {"name": "canary", "canary": {"count": 1}},
            {"name": "watch", "soak": {"durationSeconds": 3}},
            {"name": "rest", "batches": {"strategy": "fixed", "initial": 2}},
        ],
    }
    created = Rollout(cluster, name, name, nodes, policy)
    with simulated_kubelet(cluster):
        yield created
    await asyncio.to_thread(created.delete)
    handle = temporal_client.get_workflow_handle(rollout_workflow_id(name))
    with contextlib.suppress(Exception):  # already finished after the deletion's abort
        await handle.terminate("test done")
