"""Metrics and traces of a real rollout: the Grafana dashboard only queries metrics that the
worker's and the controller's /metrics endpoints expose, and one node update leaves a span tree
NodeWorkflow -> activities -> Kubernetes API calls."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from fleetwright.activities.node import all_activities
from fleetwright.activities.payloads import NAMES
from fleetwright.activities.rollout import rollout_activities
from fleetwright.kube.client import from_kubeconfig
from fleetwright.local.loopback import free_port
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.metrics import names_in
from fleetwright.process.settings import WorkerSettings
from fleetwright.worker.temporalworker import build_worker
from fleetwright.worker.tracing import ContextThreadPool, client_interceptors, tracer_provider
from fleetwright.workflows.ids import node_workflow_id
from tests.integration.test_serve import Processes, processes, settings_file
from tests.support.engine import unique
from tests.support.providers import ClusterUnderTest
from tests.support.stack import Rollout, RunningController, engine_settings

pytestmark = pytest.mark.integration

__all__ = ["processes", "settings_file"]  # fixtures shared with the process-command test

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "fleetwright.json"
METRIC = re.compile(r"\b((?:fleetwright|temporal)_[a-zA-Z0-9_:]+)")


def dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    expressions = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            expressions.append(query["query"])
    return expressions


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


async def test_every_dashboard_query_names_a_metric_a_live_rollout_exposes(
    processes: Processes, rollout: Rollout
) -> None:
    ports = {"worker": free_port(), "controller": free_port()}
    for name, port in ports.items():
        processes.start(name, metrics_port=str(port), metrics_host="127.0.0.1")
    await asyncio.to_thread(rollout.apply)
    await processes.wait_ready(rollout)
    exposed: set[str] = set()
    for port in ports.values():
        exposed |= names_in(await asyncio.to_thread(scrape, port))
    used = {m for e in dashboard_expressions(json.loads(DASHBOARD.read_text())) for m in METRIC.findall(e)}
    assert len(used) >= 15
    assert used <= exposed, sorted(used - exposed)
    # Conventional names: counters end in _total, durations are seconds, SDK metrics included.
    assert "temporal_request_total" in exposed
    assert {
        "fleetwright_stage_duration_seconds_count",
        "fleetwright_node_update_duration_seconds_count",
    } <= exposed
    assert not {n for n in exposed if n.startswith("fleetwright_") and n.endswith("_milliseconds")}
    await asyncio.to_thread(rollout.delete)  # the workflow releases the finalizer: processes still up


# ----- traces -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """The process-wide tracer provider, exporting to memory (set once: OpenTelemetry allows one)."""
    exporter = InMemorySpanExporter()
    trace.set_tracer_provider(tracer_provider("test", SimpleSpanProcessor(exporter)))
    yield exporter
    exporter.shutdown()  # later tests' spans are dropped, not kept in memory for the session


@pytest.fixture
async def traced_stack(
    cluster: ClusterUnderTest,
    temporal_server: LocalTemporal,
    temporal_client: Client,
    crds: None,
    spans: InMemorySpanExporter,
) -> AsyncIterator[str]:
    """Worker (tracing interceptors, Kubernetes calls on context-carrying threads) and controller
    on their own queue; request before ``rollout`` so both outlive its deletion."""
    api = from_kubeconfig(cluster.kubeconfig)
    queue = unique("trace")
    threads = ContextThreadPool(16)
    activities = [*all_activities(api, executor=threads), *rollout_activities(api, client_interceptors())]
    settings = WorkerSettings(
        temporal_address=temporal_server.address,
        temporal_namespace=temporal_server.namespace,
        task_queue=queue,
        kubeconfig=cluster.kubeconfig,
        engine=engine_settings(),
    )
    async with build_worker(temporal_client, activities, task_queue=queue):
        controller = RunningController(settings)
        controller.start()
        try:
            yield queue
        finally:
            await controller.stop()
    threads.shutdown(wait=False)


def tree(spans: tuple[ReadableSpan, ...], root: ReadableSpan) -> dict[str, Any]:
    """``{name: {child name: {...}}}`` under ``root`` (children of the same name merged)."""
    children: dict[str, Any] = {}
    for span in spans:
        if (
            span.parent is not None
            and root.context is not None
            and span.parent.span_id == root.context.span_id
        ):
            children.setdefault(span.name, {}).update(tree(spans, span))
    return children


async def test_one_node_update_is_a_span_tree_from_workflow_to_kubernetes_calls(
    traced_stack: str, rollout: Rollout, spans: InMemorySpanExporter
) -> None:
    await asyncio.to_thread(rollout.apply)
    await asyncio.to_thread(rollout.wait_ready, 120)
    finished = tuple(spans.get_finished_spans())
    node = rollout.nodes[0]
    runs = [
        s
        for s in finished
        if s.name == "RunWorkflow:fleetwright.node"
        and (s.attributes or {}).get("temporalWorkflowID") == node_workflow_id(rollout.name, node)
    ]
    assert runs, [(s.name, dict(s.attributes or {})) for s in finished if "/" not in s.name]
    # Temporal's interceptor hangs a workflow's spans (its run, each activity start, signals) under
    # the span that started it: for a node, the StartWorkflow of the rollout's start activity.
    parent = runs[0].parent
    assert parent is not None
    root = next(s for s in finished if s.context is not None and s.context.span_id == parent.span_id)
    assert root.name == "StartWorkflow:fleetwright.node"
    assert root.parent is not None
    starter = next(s for s in finished if s.context is not None and s.context.span_id == root.parent.span_id)
    assert starter.name == f"RunActivity:{NAMES.START_NODES}"
    shape = tree(finished, root)
    print(json.dumps(shape, indent=1))
    assert "RunWorkflow:fleetwright.node" in shape
    stage = shape[f"StartActivity:{NAMES.RUN_STAGES}"][f"RunActivity:{NAMES.RUN_STAGES}"]
    assert "POST /apis/batch/v1/namespaces/{namespace}/jobs" in stage, stage
    cordon = shape[f"StartActivity:{NAMES.CORDON}"][f"RunActivity:{NAMES.CORDON}"]
    assert any(name.startswith("PATCH /api/v1/nodes/{name}") for name in cordon), cordon
    drain = shape[f"StartActivity:{NAMES.DRAIN}"][f"RunActivity:{NAMES.DRAIN}"]
    assert "GET /api/v1/pods" in drain, drain
    await asyncio.to_thread(rollout.delete)
