"""The mutating admission webhook: it adds the runtime-required taint to a Node being created when
an ``autoTaintNewNodes`` profile targets it (``planner.profile.runtime.taint_on_join`` decides), so no
joining node is ever schedulable before it.

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
from collections.abc import Iterable
from typing import Any

from fleetwright.api.nodeprofile import NodeProfile, parse_profiles
from fleetwright.planner.profile.runtime import carries, runtime_taint, taint_on_join
from fleetwright.webhook.review import ResourceLookup, object_metadata

log = logging.getLogger(__name__)


def node_patch(node: Any, profiles: Iterable[NodeProfile]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """Pure: the JSON patch adding the runtime-required taint to a Node being created, and the
    profiles that want it; no patch when none does or the node already carries it."""
    meta = object_metadata(node)
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
            log.info(
                "node %s: tainted at admission for %s", object_metadata(node).get("name"), ", ".join(wanting)
            )
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


# ---------------------------------------------------------------------------------------------
# HTTPS server
