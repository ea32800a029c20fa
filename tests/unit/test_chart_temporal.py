"""The chart's embedded Temporal and its operator niceties, offline (``helm template``): it runs
exactly when no Temporal address is given, registers fleetwright's namespace and search attributes
with the local servers' dynamic configuration, keeps its database claim on uninstall unless told,
every workload takes placement values, and ``helm test`` checks the webhook and Temporal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwright import chart
from fleetwright.local.temporalserver import DEV_DYNAMIC_CONFIG, DEV_SQLITE_PRAGMAS
from fleetwright.workflows.search import REGISTRATION
from tests.unit.test_chart import CHART, by_kind, helm, render

pytestmark = pytest.mark.unit

ADDRESS = "fw-fleetwright-temporal.fw-system.svc:7233"


def settings_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(json.loads(by_kind(docs, "ConfigMap")["fw-fleetwright-settings"]["data"]["settings.json"]))


def flags(args: list[str], name: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == name]


def test_values_yaml_holds_the_models_defaults_for_the_embedded_temporal() -> None:
    values = chart.ChartValues.model_validate(yaml.safe_load((CHART / "values.yaml").read_text()))
    assert values.temporal == chart.ChartValues().temporal
    assert values.helm_test == chart.ChartValues().helm_test
    assert values.settings.temporal_address == ""


def test_with_no_address_the_chart_runs_its_own_temporal_and_points_every_process_at_it(
    tmp_path: Path,
) -> None:
    docs = render({}, tmp_path)
    assert settings_of(docs)["temporal_address"] == ADDRESS
    deployment = by_kind(docs, "Deployment")["fw-fleetwright-temporal"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}, "never two writers of one SQLite file"
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[:2] == ["server", "start-dev"]
    assert flags(args, "--namespace") == ["default"]
    assert dict(f.split("=", 1) for f in flags(args, "--search-attribute")) == REGISTRATION
    dynamic = dict(f.split("=", 1) for f in flags(args, "--dynamic-config-value"))
    assert {k: json.loads(v) for k, v in dynamic.items()} == DEV_DYNAMIC_CONFIG
    assert dict(f.split("=", 1) for f in flags(args, "--sqlite-pragma")) == DEV_SQLITE_PRAGMAS
    database = Path(flags(args, "--db-filename")[0])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "data")
    assert database.parent == Path(mount["mountPath"])
    claim = by_kind(docs, "PersistentVolumeClaim")["fw-fleetwright-temporal"]
    assert next(v for v in pod["volumes"] if v["name"] == "data")["persistentVolumeClaim"] == {
        "claimName": "fw-fleetwright-temporal"
    }
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "storageClassName" not in claim["spec"], "the cluster's default class"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False
    service = by_kind(docs, "Service")["fw-fleetwright-temporal"]
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"grpc": 7233, "ui": 8233}
    # No TLS or authorization of its own: only the release's pods may reach it.
    policy = by_kind(docs, "NetworkPolicy")["fw-fleetwright-temporal"]["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "temporal"
    (rule,) = policy["ingress"]
    assert rule["from"] == [
        {
            "podSelector": {
                "matchLabels": {"app.kubernetes.io/name": "fleetwright", "app.kubernetes.io/instance": "fw"}
            }
        }
    ]
    assert rule["ports"] == [{"port": "grpc"}, {"port": "ui"}]
    # Every pod of the release carries those labels: the processes and the helm test pods.
    pods = [d["spec"]["template"]["metadata"]["labels"] for d in by_kind(docs, "Deployment").values()]
    pods += [d["metadata"]["labels"] for d in by_kind(docs, "Pod").values()]
    for labels in pods:
        assert labels["app.kubernetes.io/instance"] == "fw"
        assert labels["app.kubernetes.io/name"] == "fleetwright"
    # The processes that talk to Temporal wait for its namespace; the webhook does not need it.
    for name, process in by_kind(docs, "Deployment").items():
        inits = process["spec"]["template"]["spec"].get("initContainers") or []
        if name.endswith(("-worker", "-controller")):
            (wait,) = inits
            assert wait["args"][1:] == ["default", ADDRESS]
        else:
            assert inits == []


def test_an_address_turns_the_embedded_temporal_off(tmp_path: Path) -> None:
    docs = render({"settings": {"temporal_address": "temporal.example:7233"}}, tmp_path)
    assert settings_of(docs)["temporal_address"] == "temporal.example:7233"
    assert "fw-fleetwright-temporal" not in by_kind(docs, "Deployment")
    assert by_kind(docs, "PersistentVolumeClaim") == {}
    assert by_kind(docs, "NetworkPolicy") == {}
    assert "fw-fleetwright-temporal" not in by_kind(docs, "Service")
    for process in by_kind(docs, "Deployment").values():
        assert "initContainers" not in process["spec"]["template"]["spec"]
    test = by_kind(docs, "Pod")["fw-fleetwright-test-temporal"]
    env = {e["name"]: e.get("value") for e in test["spec"]["containers"][0]["env"]}
    assert env["TEMPORAL_ADDRESS"] == "temporal.example:7233"


def test_credentials_without_an_address_are_refused_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"temporal": {"apiKey": {"secretName": "cloud-key"}}}))
    done = helm("template", "fw", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0
    assert "temporal.tls / temporal.apiKey" in done.stderr
    assert "settings.temporal_address" in done.stderr


def test_the_database_claim_follows_the_persistence_values(tmp_path: Path) -> None:
    persistence = {"storageClassName": "fast-ssd", "size": "50Gi", "keepOnUninstall": False}
    docs = render({"temporal": {"embedded": {"persistence": persistence}}}, tmp_path)
    claim = by_kind(docs, "PersistentVolumeClaim")["fw-fleetwright-temporal"]
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert "annotations" not in claim["metadata"]
    docs = render({"temporal": {"embedded": {"persistence": {"existingClaim": "mine"}}}}, tmp_path)
    assert by_kind(docs, "PersistentVolumeClaim") == {}
    pod = by_kind(docs, "Deployment")["fw-fleetwright-temporal"]["spec"]["template"]["spec"]
    assert next(v for v in pod["volumes"] if v["name"] == "data")["persistentVolumeClaim"] == {
        "claimName": "mine"
    }


def test_the_ui_is_optional(tmp_path: Path) -> None:
    docs = render({"temporal": {"embedded": {"ui": {"enabled": False}}}}, tmp_path)
    pod = by_kind(docs, "Deployment")["fw-fleetwright-temporal"]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert "--headless" in args
    assert "--ui-port" not in args
    service = by_kind(docs, "Service")["fw-fleetwright-temporal"]
    assert [p["name"] for p in service["spec"]["ports"]] == ["grpc"]


def test_every_workload_takes_resources_node_selector_tolerations_and_priority_class(tmp_path: Path) -> None:
    placement: dict[str, Any] = {
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "system", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "resources": {"requests": {"cpu": "7m", "memory": "7Mi"}},
    }
    keys = ("worker", "controller", "webhook", "workflowWorker", "helmTest")
    values: dict[str, Any] = {key: dict(placement) for key in keys}
    values["workflowWorker"]["enabled"] = True
    values["temporal"] = {"embedded": dict(placement)}
    chart.ChartValues.model_validate(values)
    docs = render(values, tmp_path)
    pods = [d["spec"]["template"]["spec"] for d in by_kind(docs, "Deployment").values()]
    pods += [d["spec"] for d in by_kind(docs, "Pod").values()]
    assert len(pods) == 7  # four processes, Temporal, two test pods
    for pod in pods:
        assert pod["nodeSelector"] == placement["nodeSelector"]
        assert pod["tolerations"] == placement["tolerations"]
        assert pod["priorityClassName"] == placement["priorityClassName"]
        assert pod["containers"][0]["resources"]["requests"] == placement["resources"]["requests"]


def test_helm_test_checks_the_webhook_with_its_ca_only_and_temporal_at_the_processes_address(
    tmp_path: Path,
) -> None:
    docs = render({}, tmp_path)
    tests = by_kind(docs, "Pod")
    assert set(tests) == {"fw-fleetwright-test-webhook", "fw-fleetwright-test-temporal"}
    for pod in tests.values():
        assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
        assert pod["spec"]["restartPolicy"] == "Never"
        assert pod["spec"]["automountServiceAccountToken"] is False
    webhook = tests["fw-fleetwright-test-webhook"]["spec"]
    (volume,) = webhook["volumes"]
    assert volume["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}], "never the webhook's key"
    assert webhook["containers"][0]["args"][1] == "https://fw-fleetwright-webhook.fw-system.svc:443/validate"
    temporal = tests["fw-fleetwright-test-temporal"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in temporal["env"]}
    assert env == {"TEMPORAL_ADDRESS": ADDRESS, "TEMPORAL_NAMESPACE": "default"}


def test_the_notes_say_how_to_reach_the_ui_and_the_cli(tmp_path: Path) -> None:
    """NOTES.txt rendered offline: a copy of the chart that renders it into a ConfigMap (helm
    template skips the notes, helm install --dry-run needs a cluster)."""
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    notes = (copy / "templates" / "NOTES.txt").read_text()
    (copy / "templates" / "_notes.tpl").write_text('{{- define "notes" }}' + notes + "{{ end }}")
    (copy / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n"
        '  notes: {{ include "notes" . | quote }}\n'
    )
    done = helm("template", "fw", str(copy), "-n", "fw-system", "--show-only", "templates/notes.yaml")
    text = yaml.safe_load(done.stdout)["data"]["notes"]
    assert "port-forward svc/fw-fleetwright-temporal 8233:8233" in text
    assert "port-forward svc/fw-fleetwright-temporal 7233:7233" in text
    assert "FLEETWRIGHT_TEMPORAL_ADDRESS=localhost:7233" in text
    assert "helm test fw -n fw-system" in text
