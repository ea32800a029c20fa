"""The Node CREATE mutation: a joining node an ``autoTaintNewNodes`` profile targets is admitted
with the runtime-required taint (the planner's ``taint_on_join`` decides); any other node, one
that already carries it, or one admitted while the profiles cannot be read passes untouched, and
no node is ever refused. The registration ignores webhook failures."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from fleetwright.api.keys import RUNTIME_REQUIRED_TAINT, state_key
from fleetwright.local import examples
from fleetwright.webhook.admission import node_webhook_configuration, webhook_configurations
from fleetwright.webhook.nodetaint import mutate
from fleetwright.webhook.server import MUTATE_PATH
from tests.unit.test_api_webhook import BrokenLookup, FakeLookup

pytestmark = pytest.mark.unit

TAINT = {"key": RUNTIME_REQUIRED_TAINT, "value": "true", "effect": "NoSchedule"}


def profile(name: str = "drivers", *, auto_taint: bool = True, pool: str = "gpu") -> dict[str, Any]:
    body = examples.profile(name, selector={"pool": pool}).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    body["spec"]["runtimeRequired"] = True
    body["spec"]["autoTaintNewNodes"] = auto_taint
    return body


def node(
    labels: dict[str, str], spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels}}
    if annotations:
        obj["metadata"]["annotations"] = annotations
    if spec is not None:
        obj["spec"] = spec
    return obj


def apply_adds(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON patch ``add`` operations (RFC 6902) the mutation uses, as the apiserver applies them."""
    out = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] == "add", op
        *parents, last = op["path"].lstrip("/").split("/")
        target: Any = out
        for part in parents:
            target = target[part]
        if last == "-":
            target.append(op["value"])
        else:  # an object member is added or replaced
            target[last] = op["value"]
    return out


def admit(
    obj: dict[str, Any], lookup: Any, operation: str = "CREATE"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The response, and the node as the apiserver would store it after the patch."""
    body = {
        "request": {
            "uid": "u1",
            "operation": operation,
            "resource": {"resource": "nodes"},
            "name": "n1",
            "object": obj,
        }
    }
    response = mutate(body, lookup)["response"]
    assert response["allowed"] is True
    if "patch" not in response:
        return response, obj
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    return response, apply_adds(obj, patch)


@pytest.mark.parametrize(
    "spec", [None, {}, {"taints": []}, {"taints": [{"key": "other", "effect": "NoExecute"}]}]
)
def test_a_targeted_joining_node_is_admitted_tainted(spec: dict[str, Any] | None) -> None:
    _, stored = admit(node({"pool": "gpu"}, spec), FakeLookup(set(), profiles=[profile()]))
    assert TAINT in stored["spec"]["taints"]
    before = (spec or {}).get("taints") or []
    assert stored["spec"]["taints"] == [*before, TAINT]


@pytest.mark.parametrize(
    ("labels", "profiles"),
    [
        ({"pool": "cpu"}, [profile()]),  # not targeted
        ({"pool": "gpu"}, [profile(auto_taint=False)]),  # runtime-required, but not on join
        ({"pool": "gpu"}, []),
    ],
)
def test_other_nodes_pass_untouched(labels: dict[str, str], profiles: list[dict[str, Any]]) -> None:
    response, _ = admit(node(labels), FakeLookup(set(), profiles=profiles))
    assert "patch" not in response


def test_a_node_already_tainted_or_with_history_is_left_alone() -> None:
    tainted = node(
        {"pool": "gpu"}, {"taints": [{"key": RUNTIME_REQUIRED_TAINT, "value": "x", "effect": "NoSchedule"}]}
    )
    assert "patch" not in admit(tainted, FakeLookup(set(), profiles=[profile()]))[0]
    # A node re-registering keeps its history: the profile recorded state on it already.
    known = node({"pool": "gpu"}, annotations={state_key("drivers"): "{}"})
    assert "patch" not in admit(known, FakeLookup(set(), profiles=[profile()]))[0]


def test_updates_are_never_patched() -> None:
    response, _ = admit(node({"pool": "gpu"}), FakeLookup(set(), profiles=[profile()]), operation="UPDATE")
    assert "patch" not in response


def test_unreadable_profiles_admit_the_node_untouched() -> None:
    response, _ = admit(node({"pool": "gpu"}), BrokenLookup())
    assert response == {"uid": "u1", "allowed": True}


def test_the_registration_never_blocks_node_registration() -> None:
    config = node_webhook_configuration(ca_bundle="Y2E=", service=("fleetwright", "fleetwright-webhook", 443))
    [hook] = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] <= 5
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["nodes"],
            "scope": "Cluster",
        }
    ]
    assert hook["clientConfig"]["service"]["path"] == MUTATE_PATH
    kinds = [c["kind"] for c in webhook_configurations(ca_bundle="Y2E=", base_url="https://127.0.0.1:1")]
    assert kinds == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]
