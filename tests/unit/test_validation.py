"""The pure validator: one test per rule family, the corpus offline, and hostile inputs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright.api.common import ApiModel
from fleetwright.api.profilechecks import parse_quantity
from fleetwright.api.validation import (
    Result,
    format_path,
    validate_deploymentpolicy,
    validate_nodeprofile,
    validate_object,
    validate_policy_deletion,
)
from tests.support.corpus import corpus_files, expected_path
from tests.support.manifests import package_manifest, profile_manifest

pytestmark = pytest.mark.unit


def errors(result: Result) -> dict[str, str]:
    return {e.path: e.rule for e in result.errors}


def test_corpus_has_at_least_40_invalid_rules() -> None:
    assert len(corpus_files("invalid")) >= 40


@pytest.mark.parametrize("path", corpus_files("invalid"), ids=lambda p: p.stem)
def test_every_invalid_example_is_rejected_offline_at_its_path(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    result = validate_object(obj, policies=set())
    expect = expected_path(path)
    assert any(e.path.startswith(expect) for e in result.errors), [str(e) for e in result.errors]


@pytest.mark.parametrize("path", corpus_files("valid"), ids=lambda p: p.stem)
def test_every_valid_example_is_accepted_offline(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    policies = {d["metadata"]["name"] for d in docs if d["kind"] == "DeploymentPolicy"}
    for doc in docs:
        result = validate_object(doc, policies=policies)
        assert result.ok, [str(e) for e in result.errors]
        assert not result.warnings, [str(w) for w in result.warnings]


def test_dependson_must_name_an_existing_package_at_its_exact_version() -> None:
    result = validate_nodeprofile(
        profile_manifest(
            package_manifest("a", "1.0.0"),
            package_manifest(
                "b", dependsOn=[{"name": "a", "version": "1.0.1"}, {"name": "zz", "version": "1.0.0"}]
            ),
        )
    )
    assert errors(result) == {
        "spec.packages[1].dependsOn[0].version": "depends-on-version-mismatch",
        "spec.packages[1].dependsOn[1].name": "depends-on-unknown",
    }


def test_cycles_are_reported_once_with_the_cycle() -> None:
    result = validate_nodeprofile(
        profile_manifest(
            package_manifest("a", dependsOn=[{"name": "c", "version": "1.0.0"}]),
            package_manifest("b", dependsOn=[{"name": "a", "version": "1.0.0"}]),
            package_manifest("c", dependsOn=[{"name": "b", "version": "1.0.0"}]),
        )
    )
    cycles = [e for e in result.errors if e.rule == "depends-on-cycle"]
    assert len(cycles) == 1
    assert cycles[0].path == "spec.packages[0].dependsOn"
    assert set(re.findall(r"\b[abc]\b", cycles[0].message)) == {"a", "b", "c"}


def test_config_interrupt_globs_must_match_a_key() -> None:
    ok = package_manifest(
        "t",
        configMap={"service_containerd.conf": "x", "sysctl.conf": "y"},
        configInterrupts=[
            {"key": "service_*.conf", "interrupt": {"type": "service", "services": ["containerd"]}},
            {"key": "sysctl.con[fg]", "interrupt": {"type": "restartAllServices"}},
        ],
    )
    assert validate_nodeprofile(profile_manifest(ok)).ok
    bad = package_manifest(
        "t", configMap={"a.conf": "x"}, configInterrupts=[{"key": "grub*", "interrupt": {"type": "reboot"}}]
    )
    assert errors(validate_nodeprofile(profile_manifest(bad))) == {
        "spec.packages[0].configInterrupts[0].key": "config-interrupt-no-match"
    }


@pytest.mark.parametrize(
    ("image", "rule"),
    [
        ("tuning", "image-fully-qualified"),
        ("nvidia/tuning", "image-fully-qualified"),
        ("ghcr.io/x/tuning:1.0.0", "image-no-tag"),
        ("ghcr.io/x/tuning@sha256:" + "a" * 64, "image-no-digest"),
        ("ghcr.io/X/tuning", "image-format"),
        ("ghcr.io/x//tuning", "image-format"),
    ],
)
def test_image_rules(image: str, rule: str) -> None:
    assert errors(validate_nodeprofile(profile_manifest(package_manifest("t", image=image)))) == {
        "spec.packages[0].image": rule
    }


@pytest.mark.parametrize(
    "image", ["ghcr.io/x/tuning", "localhost/t", "registry.example.com:5000/a/b-c", "nvcr.io/nvidia/k8s/x_y"]
)
def test_fully_qualified_images_pass(image: str) -> None:
    assert validate_nodeprofile(profile_manifest(package_manifest("t", image=image))).ok


@pytest.mark.parametrize("version", ["1.2", "v1.2.0", "01.2.3", "1.2.3-", "latest"])
def test_versions_must_be_semver(version: str) -> None:
    assert errors(validate_nodeprofile(profile_manifest(package_manifest("t", version)))) == {
        "spec.packages[0].version": "package-version-semver"
    }


def test_digest_must_be_sha256() -> None:
    result = validate_nodeprofile(profile_manifest(package_manifest("t", digest="sha256:abc")))
    assert list(errors(result)) == ["spec.packages[0].digest"]


def test_quantities() -> None:
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("lots") is None
    result = validate_nodeprofile(
        profile_manifest(package_manifest("t", resources={"cpuRequest": "2", "cpuLimit": "1500m"}))
    )
    assert errors(result) == {"spec.packages[0].resources.cpuRequest": "resources-request-exceeds-limit"}


def test_a_work_key_without_its_check_key_is_only_a_warning() -> None:
    result = validate_nodeprofile(
        profile_manifest(
            package_manifest("s", configMap={"apply.sh": "echo", "config.sh": "x", "config_check.sh": "y"})
        )
    )
    assert result.ok
    assert [(w.path, w.rule) for w in result.warnings] == [
        ("spec.packages[0].configMap[apply.sh]", "shellscript-missing-check")
    ]


def test_referenced_policy_must_exist_when_the_lookup_is_given() -> None:
    obj = profile_manifest(deploymentPolicyRef={"name": "careful"})
    assert validate_nodeprofile(obj).ok  # no lookup: not checked
    assert validate_nodeprofile(obj, policies={"careful"}).ok
    assert errors(validate_nodeprofile(obj, policies=set())) == {
        "spec.deploymentPolicyRef.name": "policy-ref-missing"
    }


def test_deleting_a_referenced_policy_is_refused() -> None:
    assert validate_policy_deletion("careful", []).ok
    refused = validate_policy_deletion("careful", ["b", "a"])
    assert not refused.ok
    assert "a, b" in refused.errors[0].message


def test_every_error_is_reported_not_just_the_first() -> None:
    obj = profile_manifest(
        package_manifest("a", "1.2", image="tuning"),
        package_manifest("b", dependsOn=[{"name": "c", "version": "1.0.0"}], interrupt={"type": "service"}),
        nodeSelector={},
        additionalTolerations=[{"operator": "Exists"}],
    )
    assert set(errors(validate_nodeprofile(obj))) == {
        "spec.packages[0].version",
        "spec.packages[0].image",
        "spec.packages[1].dependsOn[0].name",
        "spec.packages[1].interrupt.services",
        "spec.nodeSelector",
        "spec.additionalTolerations[0].key",
    }


def test_schema_errors_name_their_path() -> None:
    obj = profile_manifest(package_manifest("a", stageTimeoutSeconds="10", extra=1))
    obj["spec"]["drain"] = {"onTimeout": "never"}
    assert errors(validate_nodeprofile(obj)) == {
        "spec.packages[0].stageTimeoutSeconds": "schema-int-type",
        "spec.packages[0].extra": "schema-extra-forbidden",
        "spec.drain.onTimeout": "schema-literal-error",
    }


def test_policy_rules_and_warnings() -> None:
    obj = {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": {
            "maxUnavailable": 2,
            "steps": [{"canary": {"count": 5}}, {"batches": {"initial": 3}}],
            "compartments": [
                {"name": "a", "selector": {"matchLabels": {"x": "y"}}},
                {"name": "a", "selector": {"matchLabels": {"x": "z"}}},
            ],
        },
    }
    result = validate_deploymentpolicy(obj)
    assert errors(result) == {"spec.compartments[1].name": "compartment-duplicate"}
    assert {w.rule for w in result.warnings} == {"canary-exceeds-budget", "batch-exceeds-budget"}


def policy_doc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwright.io/v1alpha1",
        "kind": "DeploymentPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }


COMPARTMENT = {"name": "rack", "selector": {"matchLabels": {"rack": "r1"}}}


@pytest.mark.parametrize(
    ("spec", "warned"),
    [
        # the policy: two tolerated failures fill a budget of two
        (
            {"maxUnavailable": 2, "failure": {"maxFailedNodes": 2, "action": "rollback"}},
            {
                "spec.failure.maxFailedNodes": "2 >= spec.maxUnavailable (2): failed nodes stay cordoned and "
                "can fill the budget before the rule fires by count; then rollback fires as no node can start"
            },
        ),
        ({"maxUnavailable": 3, "failure": {"maxFailedNodes": 2}}, {}),
        ({"maxUnavailable": 1}, {}),  # the default rule fires on the first failure
        # 25% of fewer than 12 nodes is at most 2
        (
            {"maxUnavailable": "25%", "failure": {"maxFailedNodes": 2}},
            {"spec.failure.maxFailedNodes": "2 >= spec.maxUnavailable (25%) on fewer than 12 nodes"},
        ),
        ({"maxUnavailable": "25%", "failure": {"maxFailedNodes": 0}}, {}),
        ({"maxUnavailable": "100%", "failure": {"maxFailedNodes": 5}}, {}),  # never a node left to start
        # a compartment's own cap under the policy's rule: the warning is on the compartment's field
        (
            {
                "maxUnavailable": 5,
                "failure": {"maxFailedNodes": 1},
                "compartments": [{**COMPARTMENT, "maxUnavailable": 1}],
            },
            {"spec.compartments[0].maxUnavailable": "1 <= spec.failure.maxFailedNodes (1)"},
        ),
        # a compartment's own rule under the policy's cap
        (
            {
                "maxUnavailable": 4,
                "failure": {"maxFailedNodes": 1},
                "compartments": [{**COMPARTMENT, "failure": {"maxFailedNodes": 4, "action": "halt"}}],
            },
            {"spec.compartments[0].failure.maxFailedNodes": "4 >= spec.maxUnavailable (4)"},
        ),
        # both its own, in the percentage form
        (
            {
                "maxUnavailable": 5,
                "compartments": [
                    {**COMPARTMENT, "maxUnavailable": "10%", "failure": {"maxFailedNodes": 1}},
                ],
            },
            {
                "spec.compartments[0].failure.maxFailedNodes": "1 >= spec.compartments[0].maxUnavailable "
                "(10%) on fewer than 20 nodes"
            },
        ),
    ],
)
def test_a_failure_rule_whose_failures_can_fill_the_budget_is_warned_naming_both_fields(
    spec: dict[str, Any], warned: dict[str, str]
) -> None:
    result = validate_deploymentpolicy(policy_doc(**spec))
    assert result.ok, [str(e) for e in result.errors]
    found = {w.path: w.message for w in result.warnings if w.rule == "failures-fill-budget"}
    assert found.keys() == warned.keys(), found
    for path, start in warned.items():
        assert found[path].startswith(start), found[path]
        assert len(f"{path}: {found[path]}") <= 256  # the webhook's warning length


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "NodeProfile",
        42,
        {"kind": "NodeProfile"},
        {"kind": "NodeProfile", "spec": None},
        {"kind": "NodeProfile", "spec": {"packages": [None, 3, "x", {"name": None}]}},
        {"kind": "DeploymentPolicy", "spec": {"steps": "all"}, "metadata": []},
        {"kind": "DeploymentPolicy", "spec": {"maxUnavailable": {"a": 1}}, "status": 5},
        {"kind": "Pod"},
        {"kind": "NodeProfile", "metadata": {"name": 5}, "spec": {"packages": [{"configMap": {1: 2}}]}},
    ],
)
def test_hostile_inputs_give_errors_not_exceptions(obj: Any) -> None:
    result = validate_object(obj)
    assert not result.ok
    assert all(e.rule != "internal-error" for e in result.errors)


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("spec", "packages", 1, "dependsOn", 0, "version"), "spec.packages[1].dependsOn[0].version"),
        (("spec", "packages", 0, "configMap", "bad key", "[key]"), "spec.packages[0].configMap[bad key]"),
        (
            ("spec", "nodeSelector", "matchLabels", "nvidia.com/gpu"),
            "spec.nodeSelector.matchLabels[nvidia.com/gpu]",
        ),
    ],
)
def test_format_path(loc: tuple[Any, ...], path: str) -> None:
    assert format_path(loc) == path


def local_rule_names() -> set[str]:
    names: set[str] = set()
    stack: list[type[ApiModel]] = [ApiModel]
    while stack:
        cls = stack.pop()
        names.update(rule.name for rule in cls.__dict__.get("local_rules", ()))
        stack.extend(cls.__subclasses__())
    return names


def test_every_cel_rule_has_an_invalid_example_named_after_it() -> None:
    """So the integration corpus proves each CEL rule against the real apiserver, not just its
    Python twin."""
    corpus = {p.stem for p in corpus_files("invalid")}
    assert local_rule_names() <= corpus, sorted(local_rule_names() - corpus)
