"""Construction of Kubernetes API clients from a kubeconfig or a bearer token. Every client
traces its API calls: one OpenTelemetry client span per request (a no-op without a provider)."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from opentelemetry import trace

from fleetwright.errors import PermanentError

_tracer = trace.get_tracer("fleetwright.kube")
# Matches the worker's default activity slots (WorkerSettings.max_concurrent_activities).
CONNECTION_POOL_SIZE = 200
# The route template of the request being built (``/api/v1/nodes/{name}``): the generated client
# serializes the parameters, then sends, on the same thread.
_route: contextvars.ContextVar[str] = contextvars.ContextVar("fleetwright_kube_route", default="")
# A list as the apiserver's Table (what ``kubectl get`` prints): its columns, and with
# ``includeObject=Metadata`` each row's object as PartialObjectMetadata (no spec, no status).
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def traced(api: client.ApiClient) -> client.ApiClient:
    """Wrap the client's request in a span named after the route (``GET /api/v1/nodes/{name}``),
    so traces stay low-cardinality and show which call took how long."""
    serialize, call = api.param_serialize, api.call_api

    def param_serialize(method: str, resource_path: str, *args: Any, **kwargs: Any) -> Any:
        _route.set(resource_path)
        return serialize(method, resource_path, *args, **kwargs)

    def call_api(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        route = _route.get() or urlsplit(url).path
        _route.set("")  # a pooled thread's next request must not inherit this one's route
        with _tracer.start_as_current_span(
            f"{method} {route}",
            kind=trace.SpanKind.CLIENT,
            attributes={"http.request.method": method, "url.template": route, "url.full": url},
        ):
            return call(method, url, *args, **kwargs)

    api.param_serialize = param_serialize  # type: ignore[method-assign]
    api.call_api = call_api  # type: ignore[method-assign]
    return api


def from_kubeconfig(path: Path | str | None = None, *, context: str | None = None) -> client.ApiClient:
    """An API client for ``path`` (default: $KUBECONFIG or ~/.kube/config), or in-cluster config."""
    configuration = _pooled()
    if path is None:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return traced(client.ApiClient(configuration))
        except config.ConfigException:
            pass
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(path) if path else None, context=context, client_configuration=configuration
        )
    except (config.ConfigException, OSError) as error:
        source = path or "(default)"
        raise PermanentError(f"kubeconfig {source}: {error}", reason="InvalidKubeconfig") from error
    return traced(client.ApiClient(configuration))


def from_kubeconfig_text(text: str, source: str) -> client.ApiClient:
    """An API client for a kubeconfig held as text (a campaign's member cluster, from its Secret),
    in its current context; certificates and keys must be inline (``*-data``), as no file of the
    cluster that wrote it exists here."""
    configuration = _pooled()
    try:
        loaded = yaml.safe_load(text)
        if not isinstance(loaded, dict):
            raise config.ConfigException("not a kubeconfig (a YAML mapping)")
        config.load_kube_config_from_dict(loaded, client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (config.ConfigException, yaml.YAMLError, OSError, TypeError, KeyError) as error:
        raise PermanentError(f"kubeconfig {source}: {error}", reason="InvalidKubeconfig") from error
    return traced(client.ApiClient(configuration))


def _pooled() -> client.Configuration:
    """A configuration whose connection pool fits the worker's activity threads: the client's
    default (5 per CPU) makes every busy thread beyond it open a fresh TLS connection."""
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    return configuration


def from_token(server: str, token: str, *, ca_cert: Path | str) -> client.ApiClient:
    """An API client authenticating with a bearer token (e.g. a ServiceAccount token)."""
    configuration = _pooled()
    configuration.host = server
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.ssl_ca_cert = str(ca_cert)
    return traced(client.ApiClient(configuration))


def fetch_json(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a generated client method and return the apiserver's JSON as plain dicts, skipping the
    client's model classes, which cost several times the CPU of parsing the JSON (milliseconds per
    Node), while every caller here wants dicts anyway. A non-2xx answer still raises
    ``ApiException``."""
    response = call(*args, _preload_content=False, **kwargs)
    data: dict[str, Any] = json.loads(response.data)
    return data


def get_json(
    api: client.ApiClient,
    path: str,
    query: Sequence[tuple[str, str]] = (),
    *,
    timeout: float | None = None,
    accept: str = "application/json",
) -> dict[str, Any]:
    """GET ``path`` (``/api/v1/nodes``, with ``query`` parameters) and return the apiserver's JSON
    as plain dicts, through the client's connection, credentials and tracing but without the
    generated API classes: importing one (``CoreV1Api`` builds hundreds of model classes) would
    cost a short command such as ``fleetwright status`` most of its run. ``accept`` asks for another
    representation (a Table, ``TABLE``). A non-2xx answer raises ``ApiException``, as the generated
    methods do."""
    request = api.param_serialize(
        "GET",
        path,
        query_params=list(query),
        header_params={"Accept": accept},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request, _request_timeout=timeout)
    body = response.read()  # type: ignore[no-untyped-call]
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    data: dict[str, Any] = json.loads(body)
    return data


def send(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call a generated client method for its effect only (a patch): the object the apiserver
    answers with is read and dropped, never built into the client's model classes (the cost
    ``fetch_json`` avoids, on every status write). A non-2xx answer still raises."""
    response = call(*args, _preload_content=False, **kwargs)
    _ = response.data
    response.release_conn()


# For type annotations outside the adapter, which must not import ``kubernetes`` itself.
ApiClient = client.ApiClient
