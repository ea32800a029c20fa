"""OpenTelemetry traces of a fleetwright worker: spans for workflows and activities through
Temporal's tracing integration (``TracingInterceptor``), with the Kubernetes adapter's API calls
as child spans (``fleetwright.kube.client``), exported to OTLP/HTTP, the console or nowhere.

Owns the tracer provider's setup and the executor that carries the tracing context (and the log
context) from an activity into the threads that make its blocking Kubernetes calls; it must not
create spans of its own.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Interceptor

from fleetwright.process.settings import WorkerSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


def exporter_for(settings: WorkerSettings) -> SpanExporter | None:
    if settings.traces_exporter == "console":
        return ConsoleSpanExporter()
    if settings.traces_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415

        return OTLPSpanExporter(endpoint=settings.traces_otlp_endpoint)
    return None


def tracer_provider(process: str, processor: SpanProcessor) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": f"fleetwright-{process}"}))
    provider.add_span_processor(processor)
    return provider


def configure(settings: WorkerSettings, process: str) -> TracerProvider | None:
    """Install the global tracer provider the settings ask for (None: tracing off)."""
    exporter = exporter_for(settings)
    if exporter is None:
        return None
    provider = tracer_provider(process, BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("traces exported to %s", settings.traces_exporter)
    return provider


def interceptors() -> list[Interceptor]:
    """The worker's tracing interceptors: workflow, child workflow, activity and signal spans.
    Without a configured provider the spans are no-ops. Workflow spans are made even without a
    traced starter: rollouts are started by the controller."""
    return [TracingInterceptor(always_create_workflow_spans=True)]


def client_interceptors() -> list[ClientInterceptor]:
    """The same spans for workflows a worker's activity starts (a rollout's node workflows), so a
    node's spans hang under the start that began it."""
    return [TracingInterceptor(always_create_workflow_spans=True)]


class ContextThreadPool(ThreadPoolExecutor):
    """A thread pool whose tasks run in the submitter's context, so a Kubernetes call made on a
    thread is a child span of its activity and logs with the activity's bound fields."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)
