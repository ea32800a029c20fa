"""Property: whatever manifest arrives (plausible, subtly broken or pure junk), the validator
returns a Result: it never raises, never takes its internal-error fallback, and every error it
reports carries a message and a path in Kubernetes syntax.

Two generators: structured hypothesis strategies (good shrinking, 1,000 examples) and, for the
10,000-example run, a seeded mutation fuzzer driven by ``st.randoms`` (hypothesis owns the seed,
so a failure replays; drawing every field through hypothesis would cost ~15 ms per example)."""

from __future__ import annotations

import copy
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwright.api.validation import Result, validate_object
from fleetwright.webhook.review import review

pytestmark = pytest.mark.unit

EXAMPLES = 10_000
STRUCTURED_EXAMPLES = 1_000
CORPUS = Path(__file__).resolve().parents[1] / "integration" / "corpus"
_INDEX = r'(\[(?:"(?:[^"\\]|\\.)*"|[^\]"]*)\])'
PATH = re.compile(rf"^([A-Za-z_]\w*{_INDEX}*)?(\.[A-Za-z_]\w*{_INDEX}*)*$")

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)

NAMES = ["a", "b", "c", "tuning", "Bad_Name", "", "x" * 70]
VERSIONS = ["1.0.0", "1.2.3", "2.0.0-rc.1+b.7", "1.2", "v1.0.0", "", "01.0.0"]
IMAGES = ["ghcr.io/x/a", "tuning", "ghcr.io/x/a:1.0", "localhost/a", "ghcr.io/X/a", "a@sha256:" + "f" * 64]
INTERRUPTS = ["reboot", "service", "restartAllServices", "restart_all_services", "noop", "shutdown"]
KEYS = ["sysctl.conf", "grub.conf", "apply.sh", "apply_check.sh", "service_x.conf", "bad key"]
GLOBS = [*KEYS, "*", "service_*.conf", "[", "[!a]*", "??"]
QUANTITIES = ["1", "500m", "1Gi", "lots", "-1", "1e3", "0.5.5"]


# Cheap wrong-typed values for nested fields (the recursive ``junk`` is used at the top level only,
# because drawing it everywhere makes generation, not validation, dominate the run time).
wrong_type = st.sampled_from([None, True, 0, -1, 1.5, "", "x", "1.0.0", [], [None], {}, {"a": 1}])


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly plausible values, sometimes a value of the wrong type."""
    return st.one_of(strategy, strategy, strategy, wrong_type)


@st.composite
def interrupts(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {"type": draw(maybe(st.sampled_from(INTERRUPTS)))}
    if draw(st.booleans()):
        out["services"] = draw(
            maybe(st.lists(st.sampled_from(["containerd", "kubelet", "bad unit"]), max_size=3))
        )
    return out


@st.composite
def packages(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": draw(maybe(st.sampled_from(NAMES))),
        "version": draw(maybe(st.sampled_from(VERSIONS))),
        "image": draw(maybe(st.sampled_from(IMAGES))),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "digest": st.sampled_from(["sha256:" + "0" * 64, "sha256:abc", "md5:1"]),
        "dependsOn": st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(NAMES), "version": st.sampled_from(VERSIONS)}),
            max_size=3,
        ),
        "interrupt": interrupts(),
        "configMap": st.dictionaries(st.sampled_from(KEYS), st.text(max_size=5), max_size=4),
        "configInterrupts": st.lists(
            st.fixed_dictionaries({"key": st.sampled_from(GLOBS), "interrupt": interrupts()}), max_size=3
        ),
        "env": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["A", "1 bad"])}, optional={"value": st.text(max_size=3)}
            ),
            max_size=2,
        ),
        "resources": st.dictionaries(
            st.sampled_from(["cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit"]),
            st.sampled_from(QUANTITIES),
        ),
        "stageTimeoutSeconds": st.integers(-10, 100_000),
        "uninstall": st.fixed_dictionaries({}, optional={"enabled": st.booleans(), "apply": st.booleans()}),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            out[key] = draw(maybe(strategy))
    return out


selectors = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(
            st.sampled_from(["pool", "a/b", "bad key"]), st.sampled_from(["x", "bad!"])
        ),
        "matchExpressions": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.sampled_from(["zone", ""]),
                    "operator": st.sampled_from(["In", "Exists", "Equals"]),
                },
                optional={"values": st.lists(st.sampled_from(["a", "b"]), max_size=2)},
            ),
            max_size=2,
        ),
    },
)


@st.composite
def profiles(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"packages": draw(maybe(st.lists(packages(), max_size=5)))}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "nodeSelector": selectors,
        "allNodes": st.booleans(),
        "podNonInterruptLabels": selectors,
        "drain": st.fixed_dictionaries(
            {},
            optional={"timeoutSeconds": st.integers(-1, 10**6), "onTimeout": st.sampled_from(["wait", "x"])},
        ),
        "runtimeRequired": st.booleans(),
        "autoTaintNewNodes": st.booleans(),
        "priority": st.integers(-5, 20_000),
        "deploymentPolicyRef": st.fixed_dictionaries({"name": st.sampled_from(["p", "missing", ""])}),
        "additionalTolerations": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "key": st.sampled_from(["", "k"]),
                    "operator": st.sampled_from(["Exists", "Equal"]),
                },
            ),
            max_size=2,
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            spec[key] = draw(maybe(strategy))
    return envelope("NodeProfile", draw, spec)


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    kinds: dict[str, st.SearchStrategy[Any]] = {
        "canary": st.fixed_dictionaries({}, optional={"count": st.integers(-1, 2000), "selector": selectors}),
        "soak": st.fixed_dictionaries({}, optional={"durationSeconds": st.integers(-1, 10**7)}),
        "approval": st.fixed_dictionaries({}, optional={"timeoutSeconds": st.integers(0, 10**8)}),
        "batches": st.fixed_dictionaries(
            {},
            optional={
                "strategy": st.sampled_from(["fixed", "linear", "exponential", "random"]),
                "initial": st.integers(-1, 20_000),
                "delta": st.integers(0, 5),
                "growthFactor": st.integers(0, 5),
                "maxBatchSize": st.integers(0, 50),
                "batchThreshold": st.integers(0, 150),
                "safetyLimit": st.integers(-1, 101),
            },
        ),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(kinds)), max_size=2, unique=True))
    return {k: draw(maybe(kinds[k])) for k in chosen}


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "maxUnavailable": st.one_of(
            st.integers(-2, 50), st.sampled_from(["0%", "10%", "100%", "101%", "ten%"])
        ),
        "steps": st.lists(steps(), max_size=4),
        "failure": st.fixed_dictionaries(
            {},
            optional={
                "maxFailedNodes": st.integers(-1, 5),
                "failureThreshold": st.integers(0, 5),
                "action": st.sampled_from(["halt", "rollback", "ignore"]),
            },
        ),
        "windows": st.lists(
            st.fixed_dictionaries(
                {
                    "schedule": st.one_of(
                        st.sampled_from(["0 2 * * *", "*/5 1-3 * jan mon-fri", "0 25 * * *", "* * *"]),
                        st.text(alphabet="0123456789*/-, abcjanmon", max_size=20),
                    ),
                    "durationSeconds": st.integers(0, 10**6),
                },
                optional={"timeZone": st.sampled_from(["UTC", "Europe/Berlin", "Mars/Base", "../x", ""])},
            ),
            max_size=2,
        ),
        "compartments": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["a", "b", "Bad"]), "selector": selectors},
                optional={
                    "maxUnavailable": st.one_of(st.integers(0, 3), st.sampled_from(["0%", "50%"])),
                    "steps": st.lists(steps(), max_size=3),
                },
            ),
            max_size=3,
        ),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            spec[key] = draw(maybe(strategy))
    return envelope("DeploymentPolicy", draw, spec)


def envelope(kind: str, draw: st.DrawFn, spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": draw(st.sampled_from(["fleetwright.io/v1alpha1", "v1"])),
        "kind": kind,
        "metadata": draw(maybe(st.fixed_dictionaries({"name": st.sampled_from(["ok", "Not.Ok", "x" * 70])}))),
        "spec": spec,
    }
    if draw(st.integers(0, 9)) == 0:
        obj["status"] = draw(junk)
    return obj


manifests = st.one_of(profiles(), profiles(), policies(), policies(), junk)


def check(result: Result) -> None:
    assert isinstance(result, Result)
    for issue in result.issues:
        assert issue.rule != "internal-error", str(issue)
        assert issue.message
        assert PATH.match(issue.path), issue.path


@settings(max_examples=STRUCTURED_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests, st.one_of(st.none(), st.sets(st.sampled_from(["p", "q"]))))
def test_validator_only_accepts_or_rejects_structured(obj: Any, known: set[str] | None) -> None:
    check(validate_object(obj, policies=known))


# ---------------------------------------------------------------------------------------------
# The 10,000-spec run: mutations of the valid corpus plus randomly assembled specs


def _seeds() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((CORPUS / "valid").glob("*.yaml")) + sorted((CORPUS / "invalid").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    return docs


SEEDS = _seeds()
POOL: list[Any] = [
    None, True, False, 0, 1, -1, 2**70, 1.5, float("nan"), "", "x", "1.0.0", "1.2", "10%", "0%", "*", "[",
    "sha256:" + "a" * 64, "ghcr.io/x/y", "tuning", [], [None], [{}], {}, {"name": "a"}, {"a": {"b": [1]}},
    *NAMES, *VERSIONS, *IMAGES, *INTERRUPTS, *KEYS, *GLOBS, *QUANTITIES,
]  # fmt: skip


def _containers(node: Any) -> list[Any]:
    """Every dict and list inside ``node`` (including itself)."""
    out = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            out.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return out


def _pick(rng: random.Random) -> Any:
    # Always a copy: a shared POOL entry mutated later would leak (and grow) across examples.
    return copy.deepcopy(rng.choice(POOL))


def _mutate(rng: random.Random, obj: dict[str, Any]) -> None:
    target = rng.choice(_containers(obj))
    keys = list(target) if isinstance(target, dict) else list(range(len(target)))
    action = rng.randrange(6)
    if not keys or action == 0:  # add a value (unknown field or extra list item)
        if isinstance(target, dict):
            target[rng.choice(["bogus", "name", "version", "dependsOn", "steps", "key", ""])] = _pick(rng)
        else:
            target.append(_pick(rng))
        return
    key = rng.choice(keys)
    if action == 1:
        del target[key]
    elif action == 2:
        target[key] = _pick(rng)
    elif action == 3 and isinstance(target, list):
        target.append(copy.deepcopy(target[key]))  # duplicates: names, cycles, list-map keys
    elif action == 4 and isinstance(target[key], str):
        text = target[key]
        target[key] = text[: rng.randrange(len(text) + 1)] + rng.choice(["", "X", " ", "*", "-", ".", "0"])
    else:
        target[key] = copy.deepcopy(rng.choice(SEEDS).get("spec")) if rng.random() < 0.1 else _pick(rng)


def random_manifest(rng: random.Random) -> Any:
    if rng.random() < 0.05:
        return _pick(rng)
    obj = copy.deepcopy(rng.choice(SEEDS))
    for _ in range(rng.randrange(1, 6)):
        _mutate(rng, obj)
    return obj


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=True), st.one_of(st.none(), st.sets(st.sampled_from(["p", "q"]))))
def test_validator_only_accepts_or_rejects(rng: random.Random, known: set[str] | None) -> None:
    check(validate_object(random_manifest(rng), policies=known))


def test_the_fuzzer_reaches_both_verdicts_and_many_rules() -> None:
    """Guard against a fuzzer that only ever produces junk (or only valid specs)."""
    rng = random.Random(7)
    results = [validate_object(random_manifest(rng)) for _ in range(2_000)]
    assert any(r.ok for r in results)
    assert sum(not r.ok for r in results) > 1_000
    rules = {i.rule for r in results for i in r.issues}
    assert len(rules) >= 40, sorted(rules)


class Lookup:
    def policy_names(self) -> set[str]:
        return {"p"}

    def profiles_referencing(self, policy: str) -> list[str]:
        return ["a"] if policy == "p" else []

    def profile_objects(self) -> list[dict[str, Any]]:
        return []

    def policy_registries(self) -> dict[str, list[str]]:
        return {"p": ["ghcr.io/allowed"]}


@settings(max_examples=STRUCTURED_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", None]),
    st.sampled_from(["nodeprofiles", "deploymentpolicies", "pods"]),
    st.randoms(use_true_random=True),
    st.one_of(st.none(), junk),
)
def test_webhook_always_answers(operation: str | None, resource: str, rng: random.Random, old: Any) -> None:
    obj = random_manifest(rng)
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "operation": operation,
            "resource": {"resource": resource},
            "object": obj,
            "oldObject": old,
        },
    }
    answer = review(body, Lookup())
    response = answer["response"]
    assert response["uid"] == "u"
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert response["status"]["message"]
        assert "internal validation error" not in response["status"]["message"]
