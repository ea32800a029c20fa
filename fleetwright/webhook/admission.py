"""fleetwright's admission webhooks: AdmissionReview v1 over HTTPS. The validating one answers with
the pure validator (``fleetwright.api.validation``); the mutating one adds the runtime-required
taint to a Node being created when an ``autoTaintNewNodes`` profile targets it
(``planner.runtime.taint_on_join`` decides), so no joining node is ever schedulable before it.

Owns the wire format (AdmissionReview in, AdmissionReview out), the HTTPS server (stdlib
``http.server`` in a thread) and the webhook configurations it needs. Cluster facts the webhooks
need (which policies exist, which profiles reference a policy, the NodeProfiles) come through the
small ``ResourceLookup`` protocol supplied by the caller, so this module never talks to the API
itself. The operator's image rules (``AdmissionPolicy``: digest pinning, allowed registries) are
settings given to the server, applied to every NodeProfile create and update.

The Node mutation never refuses a node and is registered with ``failurePolicy: Ignore``: node
registration must not depend on a Deployment that itself needs nodes to run (a cluster whose
webhook pods are gone could never get a node back). While it is unreachable a joining node
registers untainted and the controller taints it when it sees the node (a window of
milliseconds); ``kubelet --register-with-taints`` closes even that (docs/runtime-taint.md).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import threading
from collections.abc import Collection, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from fleetwright.api.common import VERSION
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.keys import GROUP, NODE_WEBHOOK_NAME, WEBHOOK_NAME
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.api.nodeprofile import NodeProfile, parse_profiles
from fleetwright.api.validation import (
    AdmissionPolicy,
    Issue,
    Result,
    validate_deploymentpolicy,
    validate_nodeprofile,
    validate_policy_deletion,
)
from fleetwright.planner.runtime import carries, runtime_taint, taint_on_join

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/validate"
MUTATE_PATH = "/mutate-node"
# A joining node's registration waits at most this long for the Node mutation (then it is ignored).
NODE_WEBHOOK_TIMEOUT_SECONDS = 5
HEALTH_PATH = "/healthz"
# The apiserver refuses larger request bodies anyway (3 MiB objects, twice for UPDATE).
_MAX_BODY = 8 * 1024 * 1024
# Kubernetes truncates long warnings; keep each one readable.
_MAX_WARNING = 256
# The JSON file with the operator's image rules (the chart renders its ``admission`` values there).
# Named like a WorkerSettings override (FLEETWRIGHT_<FIELD>) of a future ``admission_file`` path.
ADMISSION_ENV = "FLEETWRIGHT_ADMISSION_FILE"


class AdmissionPolicyError(ValueError):
    """The admission policy file is unreadable or invalid; the message names the file and field."""


def load_admission_policy(path: Path | None = None) -> AdmissionPolicy:
    """The image rules from ``path``, else from the file named by ``FLEETWRIGHT_ADMISSION_FILE``; no
    rules when neither is given. A bad file stops the webhook rather than silently admitting."""
    source = path or (Path(os.environ[ADMISSION_ENV]) if os.environ.get(ADMISSION_ENV) else None)
    if source is None:
        return AdmissionPolicy()
    try:
        return AdmissionPolicy.model_validate_json(source.read_text())
    except OSError as error:
        raise AdmissionPolicyError(f"admission policy {source}: {error}") from error
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in error.errors()
        )
        raise AdmissionPolicyError(f"admission policy {source}: {problems}") from error


class ResourceLookup(Protocol):
    """Facts about the cluster the validator needs, supplied by the caller."""

    def policy_names(self) -> Collection[str]:
        """Names of the existing DeploymentPolicies."""
        ...

    def profiles_referencing(self, policy: str) -> Collection[str]:
        """Names of the NodeProfiles whose spec.deploymentPolicyRef.name is ``policy``."""
        ...

    def profile_objects(self) -> list[dict[str, Any]]:
        """Every NodeProfile, as the API returns it."""
        ...


# ---------------------------------------------------------------------------------------------
# AdmissionReview handling (pure apart from the lookup calls)


def _policy_ref(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    spec = obj.get("spec")
    ref = spec.get("deploymentPolicyRef") if isinstance(spec, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) else None


def _metadata(obj: Any) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _is_deleting(obj: Any) -> bool:
    return bool(_metadata(obj).get("deletionTimestamp"))


def evaluate(
    request: dict[str, Any], lookup: ResourceLookup, admission: AdmissionPolicy | None = None
) -> Result:
    """Validate one AdmissionRequest. Unknown resources and operations are allowed untouched."""
    resource_info = request.get("resource")
    resource = resource_info.get("resource") if isinstance(resource_info, dict) else None
    operation = request.get("operation")
    obj = request.get("object")
    old = request.get("oldObject")
    if resource == POLICY_PLURAL:
        if operation == "DELETE":
            name = str(request.get("name") or _metadata(old).get("name") or "")
            return validate_policy_deletion(name, lookup.profiles_referencing(name))
        if operation in {"CREATE", "UPDATE"} and not _is_deleting(obj):
            return validate_deploymentpolicy(obj)
    if resource == PROFILE_PLURAL and operation in {"CREATE", "UPDATE"} and not _is_deleting(obj):
        # On UPDATE the reference is re-checked only when it changed, so an unrelated edit never
        # wedges on a policy that vanished some other way.
        check_ref = operation == "CREATE" or _policy_ref(obj) != _policy_ref(old)
        policies = lookup.policy_names() if check_ref and _policy_ref(obj) is not None else None
        return validate_nodeprofile(obj, policies=policies, admission=admission)
    return Result()


def _kind_and_name(request: dict[str, Any]) -> tuple[str, str]:
    kind_info = request.get("kind")
    kind = str((kind_info.get("kind") if isinstance(kind_info, dict) else None) or "object")
    name = str(request.get("name") or _metadata(request.get("object")).get("name") or "")
    return kind, name


def _cause(issue: Issue) -> dict[str, str]:
    return {"field": issue.path, "message": issue.message, "reason": "FieldValueInvalid"}


def response_for(request: dict[str, Any], result: Result) -> dict[str, Any]:
    """The AdmissionResponse for ``result``: every error with its field path in the message."""
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": result.ok}
    if result.warnings:
        response["warnings"] = [str(w)[:_MAX_WARNING] for w in result.warnings]
    if not result.ok:
        kind, name = _kind_and_name(request)
        details = "; ".join(f"{e}" for e in result.errors)
        verb = "cannot be deleted" if request.get("operation") == "DELETE" else "is invalid"
        response["status"] = {
            "code": 403 if request.get("operation") == "DELETE" else 422,
            "reason": "Forbidden" if request.get("operation") == "DELETE" else "Invalid",
            "message": f'{kind} "{name}" {verb}: {details}',
            "details": {
                "name": name,
                "group": GROUP,
                "kind": kind,
                "causes": [_cause(e) for e in result.errors],
            },
        }
    return response


def review(body: Any, lookup: ResourceLookup, admission: AdmissionPolicy | None = None) -> dict[str, Any]:
    """AdmissionReview in, AdmissionReview out. Never raises: a lookup failure denies the request
    with the reason (failurePolicy Fail semantics, but with a readable message)."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        request = {}
        result = Result()
        result.error("", "malformed AdmissionReview: no request", "admission-malformed")
    else:
        try:
            result = evaluate(request, lookup, admission)
        except Exception as exc:  # a failed lookup must produce an answer, not a 500
            log.warning("admission lookup failed: %s", exc)
            result = Result()
            result.error(
                "", f"cannot validate now (cluster lookup failed: {exc}); retry", "admission-lookup-failed"
            )
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response_for(request, result),
    }


# ---------------------------------------------------------------------------------------------
# Node CREATE: the runtime-required taint at admission


def node_patch(node: Any, profiles: Iterable[NodeProfile]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """Pure: the JSON patch adding the runtime-required taint to a Node being created, and the
    profiles that want it; no patch when none does or the node already carries it."""
    meta = _metadata(node)
    spec = node.get("spec") if isinstance(node, dict) else None
    taints = (spec.get("taints") if isinstance(spec, dict) else None) or []
    wanting = taint_on_join(meta.get("labels") or {}, meta.get("annotations") or {}, profiles)
    if not wanting or carries(taints):
        return [], wanting
    if not isinstance(spec, dict):
        return [{"op": "add", "path": "/spec", "value": {"taints": [runtime_taint()]}}], wanting
    if not taints:
        return [{"op": "add", "path": "/spec/taints", "value": [runtime_taint()]}], wanting
    return [{"op": "add", "path": "/spec/taints/-", "value": runtime_taint()}], wanting


def mutate(body: Any, lookup: ResourceLookup) -> dict[str, Any]:
    """AdmissionReview in, AdmissionReview out, for a Node CREATE: always allowed, with the taint
    patch when a profile wants it. A failed lookup admits the node untouched (logged): refusing
    would stop nodes from joining, and the controller taints it once it sees it."""
    request = body.get("request") if isinstance(body, dict) else None
    request = request if isinstance(request, dict) else {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    resource_info = request.get("resource")
    resource = resource_info.get("resource") if isinstance(resource_info, dict) else None
    if resource == "nodes" and request.get("operation") == "CREATE":
        node = request.get("object")
        try:
            patch, wanting = node_patch(node, parse_profiles(lookup.profile_objects()))
        except Exception as exc:  # never refuse a node for our own failure
            log.warning(
                "node %s admitted untainted: cannot read the NodeProfiles: %s", request.get("name"), exc
            )
            patch, wanting = [], ()
        if patch:
            log.info("node %s: tainted at admission for %s", _metadata(node).get("name"), ", ".join(wanting))
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


# ---------------------------------------------------------------------------------------------
# HTTPS server


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 15  # seconds a slow client may hold a handler thread

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook %s: " + format, self.address_string(), *args)

    def _send(self, status: HTTPStatus, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        if self.path == HEALTH_PATH:
            self._send(HTTPStatus.OK, b"ok", "text/plain")
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path not in (WEBHOOK_PATH, MUTATE_PATH):
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > _MAX_BODY:
            self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, b"bad content length", "text/plain")
            return
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._send(HTTPStatus.BAD_REQUEST, b"body is not JSON", "text/plain")
            return
        if path == MUTATE_PATH:
            answer = mutate(body, self.server.lookup)
        else:
            answer = review(body, self.server.lookup, self.server.admission)
        self._send(HTTPStatus.OK, json.dumps(answer).encode(), "application/json")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        lookup: ResourceLookup,
        context: ssl.SSLContext,
        admission: AdmissionPolicy | None,
    ) -> None:
        super().__init__(address, _Handler)
        self.lookup = lookup
        self.admission = admission
        # The TLS handshake happens in the handler thread (first read), so one slow client cannot
        # stall accept().
        self.socket = context.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Failed TLS handshakes and dropped connections are the client's problem; log, don't print.
        log.debug("webhook connection from %s failed", client_address, exc_info=True)


class WebhookServer:
    """The webhook's HTTPS endpoint in a background thread. Use as a context manager."""

    def __init__(
        self,
        lookup: ResourceLookup,
        *,
        cert_file: Path,
        key_file: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        admission: AdmissionPolicy | None = None,
    ) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(cert_file), str(key_file))
        self._host = host
        self._server = _Server((host, port), lookup, context, admission)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fleetwright-webhook", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://{self._host}:{self.port}{WEBHOOK_PATH}"

    @property
    def base_url(self) -> str:
        return f"https://{self._host}:{self.port}"

    def start(self) -> WebhookServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# Registration


def _client_config(
    ca_bundle: str, url: str | None, service: tuple[str, str, int] | None, path: str
) -> dict[str, Any]:
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url or service")
    client_config: dict[str, Any] = {"caBundle": ca_bundle}
    if url is not None:
        client_config["url"] = url
    elif service is not None:
        namespace, svc, port = service
        client_config["service"] = {"namespace": namespace, "name": svc, "port": port, "path": path}
    return client_config


def webhook_configuration(
    *,
    ca_bundle: str,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    name: str = "fleetwright",
    timeout_seconds: int = 10,
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration for fleetwright's resources. Give either ``url`` (tests,
    out-of-cluster) or ``service`` = (namespace, name, port) (in-cluster)."""
    client_config = _client_config(ca_bundle, url, service, WEBHOOK_PATH)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "fleetwright"}},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": timeout_seconds,
                "matchPolicy": "Equivalent",
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": [VERSION],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [PROFILE_PLURAL, POLICY_PLURAL],
                        "scope": "Cluster",
                    },
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": [VERSION],
                        "operations": ["DELETE"],
                        "resources": [POLICY_PLURAL],
                        "scope": "Cluster",
                    },
                ],
            }
        ],
    }


def node_webhook_configuration(
    *,
    ca_bundle: str,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    name: str = "fleetwright",
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration that taints joining nodes (Node CREATE only), with
    ``failurePolicy: Ignore`` and a short timeout: node registration never waits on fleetwright
    for long, nor fails because of it (see the module's docstring)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "fleetwright"}},
        "webhooks": [
            {
                "name": NODE_WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": NODE_WEBHOOK_TIMEOUT_SECONDS,
                "matchPolicy": "Equivalent",
                "reinvocationPolicy": "Never",
                "clientConfig": _client_config(ca_bundle, url, service, MUTATE_PATH),
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["nodes"],
                        "scope": "Cluster",
                    }
                ],
            }
        ],
    }


def webhook_configurations(
    *, ca_bundle: str, base_url: str, name: str = "fleetwright"
) -> list[dict[str, Any]]:
    """Both webhooks of a server reached at ``base_url`` (``https://host:port``), out of cluster."""
    return [
        webhook_configuration(ca_bundle=ca_bundle, url=base_url + WEBHOOK_PATH, name=name),
        node_webhook_configuration(ca_bundle=ca_bundle, url=base_url + MUTATE_PATH, name=name),
    ]
