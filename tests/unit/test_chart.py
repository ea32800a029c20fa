"""The Helm chart offline: ``helm lint``, ``helm template`` for several value sets (defaults, HA,
cert-manager, external Temporal with mTLS and an API key), generated files that do not drift from
their models, values rejected by name, and the security posture of what it renders."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from fleetwright import chart
from fleetwright.api import keys
from fleetwright.binaries import control_plane_binary
from fleetwright.process.settings import WorkerSettings
from fleetwright.webhook.admission import node_webhook_configuration, webhook_configuration
from fleetwright.webhook.review import ADMISSION_ENV, load_admission_policy
from fleetwright.workflows.enginesettings import EngineSettings

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "fleetwright"

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "ha": {
        "worker": {"replicas": 4},
        "controller": {"replicas": 3},
        "webhook": {"replicas": 3},
        "podDisruptionBudget": {"maxUnavailable": 1},
        "image": {"digest": "sha256:" + "b" * 64},
    },
    "cert-manager": {"webhook": {"certManager": {"enabled": True}}},
    "cert-manager-issuer": {
        "webhook": {
            "certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}
        }
    },
    "external-temporal-tls": {
        "settings": {"temporal_address": "fleet.a1b2c.tmprl.cloud:7233", "temporal_namespace": "fleet.a1b2c"},
        "temporal": {
            "tls": {"secretName": "temporal-mtls", "serverName": "fleet.a1b2c.tmprl.cloud"},
            "apiKey": {"secretName": "temporal-api-key", "key": "token"},
        },
        "admission": {"require_digest": True, "allowed_registries": ["ghcr.io/acme"]},
    },
}


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(control_plane_binary("helm")), *args], capture_output=True, text=True, check=check, timeout=120
    )


def render(values: dict[str, Any], tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = helm("template", "fw", str(CHART), "-n", "fw-system", "-f", str(path), *extra)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_generated_files_do_not_drift() -> None:
    assert chart.drift() == [], "run python -m fleetwright.chart"
    for name in ("nodeprofiles.fleetwright.io.yaml", "deploymentpolicies.fleetwright.io.yaml"):
        assert (CHART / "crds" / name).read_text() == (REPO / "crds" / name).read_text()


def test_drift_is_reported_with_a_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert chart.main(["--chart", str(tmp_path)]) == 0
    schema = tmp_path / chart.SCHEMA_FILE
    schema.write_text(schema.read_text().replace('"replicas"', '"replica"', 1))
    assert chart.main(["--chart", str(tmp_path), "--check"]) == 1
    out = capsys.readouterr().out
    assert '-        "replica": {' in out
    assert '+        "replicas": {' in out


def test_values_yaml_is_valid_chart_values() -> None:
    values = chart.ChartValues.model_validate(yaml.safe_load((CHART / "values.yaml").read_text()))
    assert values.settings.metrics_port > 0
    # The chart's templates read the package namespace from values.yaml: the model's default.
    assert values.settings.engine.package_namespace == EngineSettings().package_namespace


def test_the_schema_embeds_every_worker_setting() -> None:
    schema = json.loads((CHART / chart.SCHEMA_FILE).read_text())
    settings_ref = schema["properties"]["settings"]["$ref"].rsplit("/", 1)[-1]
    fields = set(schema["$defs"][settings_ref]["properties"])
    assert fields == set(WorkerSettings.model_fields)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_helm_lint_passes(name: str, tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(VALUE_SETS[name]))
    done = helm("lint", "--strict", str(CHART), "-f", str(path), check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_helm_template_renders(name: str, tmp_path: Path) -> None:
    values = VALUE_SETS[name]
    chart.ChartValues.model_validate(values)  # every value set is also valid for the model
    docs = render(values, tmp_path)
    embedded = not (values.get("settings") or {}).get("temporal_address")
    deployments = by_kind(docs, "Deployment")
    processes = {f"fw-fleetwright-{c}" for c in ("worker", "controller", "webhook")}
    assert set(deployments) == processes | ({"fw-fleetwright-temporal"} if embedded else set())
    deployments = {name: d for name, d in deployments.items() if name in processes}
    assert set(by_kind(docs, "PodDisruptionBudget")) == set(deployments)
    for component, deployment in deployments.items():
        want = ((values.get(component.rsplit("-", 1)[1]) or {}).get("replicas")) or 2
        assert deployment["spec"]["replicas"] == want
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["command"] == ["fleetwright", component.rsplit("-", 1)[1]]
        assert container["readinessProbe"]
        assert container["livenessProbe"]
        startup = container["startupProbe"]
        assert startup["failureThreshold"] * startup["periodSeconds"] >= 300
        assert container["resources"]["requests"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert pod["serviceAccountName"] == component
    settings = json.loads(by_kind(docs, "ConfigMap")["fw-fleetwright-settings"]["data"]["settings.json"])
    WorkerSettings.model_validate(settings)  # the processes will accept their file
    namespace = by_kind(docs, "Namespace")["fleetwright-system"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    webhook = by_kind(docs, "ValidatingWebhookConfiguration")["fw-fleetwright"]["webhooks"][0]
    assert webhook["clientConfig"]["service"] == {
        "namespace": "fw-system",
        "name": "fw-fleetwright-webhook",
        "port": 443,
        "path": "/validate",
    }


def test_the_validating_webhook_is_registered_as_the_server_defines_it(tmp_path: Path) -> None:
    """The chart's ValidatingWebhookConfiguration is the one ``webhook_configuration`` builds (the
    local stack registers that one): the same rules, policies and path, with the chart's CA."""
    docs = render({}, tmp_path)
    [rendered] = by_kind(docs, "ValidatingWebhookConfiguration")["fw-fleetwright"]["webhooks"]
    ca = by_kind(docs, "Secret")["fw-fleetwright-webhook-tls"]["data"]["ca.crt"]
    service = ("fw-system", "fw-fleetwright-webhook", 443)
    [expected] = webhook_configuration(ca_bundle=ca, service=service)["webhooks"]
    assert rendered == expected


def test_the_node_webhook_is_registered_as_the_server_defines_it(tmp_path: Path) -> None:
    """The chart's MutatingWebhookConfiguration is the one ``node_webhook_configuration`` builds:
    Node CREATE only, failurePolicy Ignore, the short timeout, the server's path, the chart's CA."""
    docs = render({}, tmp_path)
    [rendered] = by_kind(docs, "MutatingWebhookConfiguration")["fw-fleetwright"]["webhooks"]
    ca = by_kind(docs, "Secret")["fw-fleetwright-webhook-tls"]["data"]["ca.crt"]
    service = ("fw-system", "fw-fleetwright-webhook", 443)
    [expected] = node_webhook_configuration(ca_bundle=ca, service=service)["webhooks"]
    assert rendered == expected
    injected = render(VALUE_SETS["cert-manager"], tmp_path)
    config = by_kind(injected, "MutatingWebhookConfiguration")["fw-fleetwright"]
    assert (
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        == "fw-system/fw-fleetwright-webhook"
    )
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]


def test_the_self_managed_certificate_serves_the_service_name(tmp_path: Path) -> None:
    docs = render({}, tmp_path)
    secret = by_kind(docs, "Secret")["fw-fleetwright-webhook-tls"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert "fw-fleetwright-webhook.fw-system.svc" in names
    config = by_kind(docs, "ValidatingWebhookConfiguration")["fw-fleetwright"]
    assert config["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert not by_kind(docs, "Certificate")


def test_cert_manager_issues_and_injects_instead(tmp_path: Path) -> None:
    docs = render(VALUE_SETS["cert-manager"], tmp_path)
    assert not by_kind(docs, "Secret")
    certificate = by_kind(docs, "Certificate")["fw-fleetwright-webhook"]
    assert certificate["spec"]["secretName"] == "fw-fleetwright-webhook-tls"
    assert certificate["spec"]["issuerRef"] == {"name": "fw-fleetwright-selfsigned", "kind": "Issuer"}
    assert by_kind(docs, "Issuer")
    config = by_kind(docs, "ValidatingWebhookConfiguration")["fw-fleetwright"]
    assert (
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        == "fw-system/fw-fleetwright-webhook"
    )
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]
    external = render(VALUE_SETS["cert-manager-issuer"], tmp_path)
    assert not by_kind(external, "Issuer")


def test_temporal_credentials_are_mounted_from_secrets_never_in_the_settings(tmp_path: Path) -> None:
    docs = render(VALUE_SETS["external-temporal-tls"], tmp_path)
    data = by_kind(docs, "ConfigMap")["fw-fleetwright-settings"]["data"]
    assert json.loads(data["settings.json"])["temporal_address"] == "fleet.a1b2c.tmprl.cloud:7233"
    assert json.loads(data["admission.json"]) == {
        "require_digest": True,
        "allowed_registries": ["ghcr.io/acme"],
    }
    for deployment in by_kind(docs, "Deployment").values():
        pod = deployment["spec"]["template"]["spec"]
        secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        assert {"temporal-mtls", "temporal-api-key"} <= secrets
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["FLEETWRIGHT_TEMPORAL_API_KEY_FILE"] == "/etc/fleetwright/temporal-api-key/token"
        assert env["FLEETWRIGHT_TEMPORAL_TLS_SERVER_NAME"] == "fleet.a1b2c.tmprl.cloud"
        assert all("valueFrom" not in e for e in pod["containers"][0]["env"])


def test_the_webhook_reads_the_rendered_admission_rules(tmp_path: Path) -> None:
    docs = render(VALUE_SETS["external-temporal-tls"], tmp_path)
    pod = by_kind(docs, "Deployment")["fw-fleetwright-webhook"]["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    path = Path(env[ADMISSION_ENV])
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "settings")
    assert path.parent == Path(mount["mountPath"])
    (tmp_path / path.name).write_text(
        by_kind(docs, "ConfigMap")["fw-fleetwright-settings"]["data"][path.name]
    )
    assert load_admission_policy(tmp_path / path.name).require_digest is True


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"worker": {"replica": 3}}, "replica"),
        ({"webhook": {"failurePolicy": "Maybe"}}, "failurePolicy"),
        ({"settings": {"temporal_adress": "x:7233"}}, "temporal_adress"),
        ({"settings": {"max_concurrent_activities": 0}}, "max_concurrent_activities"),
        ({"admission": {"require_digests": True}}, "require_digests"),
        ({"packageNamespace": {"name": "elsewhere"}}, "packageNamespace"),
        ({"settings": {"engine": {"package_namespace": "Not_A_Name"}}}, "package_namespace"),
        ({"settings": {"worker_role": "both"}}, "worker_role"),
        ({"workflowWorker": {"enabled": "yes"}}, "enabled"),
    ],
)
def test_bad_values_are_rejected_naming_the_field(values: dict[str, Any], named: str, tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = helm("template", "fw", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0
    assert named in done.stderr, done.stderr


def test_probes_need_the_metrics_port(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"settings": {"metrics_port": 0}}))
    done = helm("template", "fw", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0
    assert "settings.metrics_port" in done.stderr


def test_a_workflow_worker_takes_the_workflows_and_the_worker_keeps_the_activities(tmp_path: Path) -> None:
    def roles(values: dict[str, Any]) -> dict[str, tuple[list[str], str | None]]:
        deployments = by_kind(render(values, tmp_path), "Deployment")
        found = {}
        for name, deployment in deployments.items():
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            env = {e["name"]: e["value"] for e in container.get("env", [])}
            found[name] = (container.get("command"), env.get("FLEETWRIGHT_WORKER_ROLE"))
        return found

    # Off (the default): one worker Deployment runs both, on the settings' own role ("all").
    assert roles({})["fw-fleetwright-worker"] == (["fleetwright", "worker"], None)
    assert "fw-fleetwright-workflow-worker" not in roles({})
    split = {
        "workflowWorker": {"enabled": True, "replicas": 3},
        "serviceAccountAnnotations": {"iam.example.com/role": "fleet"},
    }
    chart.ChartValues.model_validate(split)
    assert {k: v for k, v in roles(split).items() if "worker" in k} == {
        "fw-fleetwright-worker": (["fleetwright", "worker"], "activities"),
        "fw-fleetwright-workflow-worker": (["fleetwright", "worker"], "workflows"),
    }
    docs = render(split, tmp_path)
    deployment = by_kind(docs, "Deployment")["fw-fleetwright-workflow-worker"]
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    # Workflows make no Kubernetes call: an account with no role and no mounted token.
    assert pod["serviceAccountName"] == "fw-fleetwright-workflow-worker"
    assert pod["automountServiceAccountToken"] is False
    account = by_kind(docs, "ServiceAccount")["fw-fleetwright-workflow-worker"]
    assert account["automountServiceAccountToken"] is False
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "fleet"}  # like every account
    bound = [
        b["subjects"][0]["name"]
        for b in [*by_kind(docs, "ClusterRoleBinding").values(), *by_kind(docs, "RoleBinding").values()]
    ]
    assert "fw-fleetwright-workflow-worker" not in bound
    assert "fw-fleetwright-workflow-worker" in by_kind(docs, "PodDisruptionBudget")


def test_the_worker_role_is_the_charts_to_set(tmp_path: Path) -> None:
    """A settings role would make every worker Deployment a workflow (or activity) worker alone:
    nothing would run the other half."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"settings": {"worker_role": "workflows"}}))
    done = helm("template", "fw", str(CHART), "-f", str(path), check=False)
    assert done.returncode != 0
    assert "settings.worker_role" in done.stderr
    assert "workflowWorker.enabled" in done.stderr


def test_rbac_grants_no_wildcards_secrets_or_spec_writes(tmp_path: Path) -> None:
    docs = render({}, tmp_path)
    roles = [*by_kind(docs, "ClusterRole").values(), *by_kind(docs, "Role").values()]
    assert len(roles) == 5
    for role in roles:
        for rule in role["rules"]:
            assert "*" not in rule["verbs"], rule
            assert "*" not in rule["resources"], rule
            if "secrets" in rule["resources"]:
                # Only reading, only the package namespace (a policy's signature keys), where the
                # worker's Jobs could mount any Secret anyway.
                assert role["kind"] == "Role", rule
                assert role["metadata"]["name"].endswith("-packages"), rule
                assert rule["resources"] == ["secrets"], rule
                assert rule["verbs"] == ["get"], rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
            if rule["apiGroups"] == [keys.GROUP]:
                # never create, update or delete: the operator only lists, watches, writes the
                # status and patches its finalizer (RBAC cannot narrow a patch to one field)
                assert set(rule["verbs"]) <= {"get", "list", "watch", "patch"}, rule


def test_the_keys_the_chart_spells_out_are_the_codes(tmp_path: Path) -> None:
    """The templates repeat a few of ``keys`` (the webhook's name, the API group its rules and
    policy match): a rename there must reach the chart, or the chart stops working silently."""
    docs = render({}, tmp_path)
    webhooks = by_kind(docs, "ValidatingWebhookConfiguration")["fw-fleetwright"]["webhooks"]
    assert [w["name"] for w in webhooks] == [keys.WEBHOOK_NAME]
    rules = [
        *(rule for d in docs if d["kind"] in ("ClusterRole", "Role") for rule in d["rules"]),
        *(
            r
            for d in docs
            if d["kind"] == "ValidatingAdmissionPolicy"
            for r in d["spec"]["matchConstraints"]["resourceRules"]
        ),
        *(r for w in webhooks for r in w["rules"]),
    ]
    ours = {group for rule in rules for group in rule["apiGroups"] if "fleetwright" in group}
    assert ours == {keys.GROUP}


def test_package_chart_builds_an_archive(tmp_path: Path) -> None:
    done = helm("package", str(CHART), "-d", str(tmp_path))
    assert (tmp_path / "fleetwright-0.2.0.tgz").exists(), done.stdout


def test_the_package_namespace_is_the_engines_setting_with_namespaced_rights_only(tmp_path: Path) -> None:
    docs = render({"settings": {"engine": {"package_namespace": "host-packages"}}}, tmp_path)
    (namespace,) = by_kind(docs, "Namespace").values()
    assert namespace["metadata"]["name"] == "host-packages"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    packages = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Role", "RoleBinding")}
    assert packages["fw-fleetwright-packages"]["metadata"]["namespace"] == "host-packages"
    settings = json.loads(by_kind(docs, "ConfigMap")["fw-fleetwright-settings"]["data"]["settings.json"])
    assert settings["engine"]["package_namespace"] == "host-packages"
    # No cluster-wide right to create (or otherwise touch) namespaces: the chart makes the one needed.
    for role in by_kind(docs, "ClusterRole").values():
        for rule in role["rules"]:
            assert "namespaces" not in rule.get("resources", []), (role["metadata"]["name"], rule)


def test_registry_credentials_are_mounted_on_the_activity_worker_only(tmp_path: Path) -> None:
    values = {
        "workflowWorker": {"enabled": True},
        "settings": {"engine": {"image_pinning": True}},
        "registry": {"secretName": "pull-secret", "authKey": ".dockerconfigjson", "caKey": "ca.crt"},
    }
    docs = render(values, tmp_path)
    for name, deployment in by_kind(docs, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}
        if name == "fw-fleetwright-worker":
            assert "pull-secret" in secrets
            assert env["FLEETWRIGHT_REGISTRY_AUTH_FILE"] == "/etc/fleetwright/registry/.dockerconfigjson"
            assert env["FLEETWRIGHT_REGISTRY_CA_FILE"] == "/etc/fleetwright/registry/ca.crt"
        else:
            assert "pull-secret" not in secrets, name
            assert "FLEETWRIGHT_REGISTRY_AUTH_FILE" not in env, name


def test_prometheus_credentials_are_mounted_on_the_activity_worker_only(tmp_path: Path) -> None:
    values = {
        "workflowWorker": {"enabled": True},
        "settings": {
            "prometheus_url": "https://prometheus.monitoring:9090",
            "prometheus_basic_auth_user": "fw",
        },
        "prometheus": {"secretName": "prom-auth", "passwordKey": "password", "caKey": "ca.crt"},
    }
    docs = render(values, tmp_path)
    data = by_kind(docs, "ConfigMap")["fw-fleetwright-settings"]["data"]
    assert "password" not in data["settings.json"]
    for name, deployment in by_kind(docs, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
        env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}
        if name == "fw-fleetwright-worker":
            assert "prom-auth" in secrets
            password = env["FLEETWRIGHT_PROMETHEUS_BASIC_AUTH_PASSWORD_FILE"]
            assert password == "/etc/fleetwright/prometheus/password"
            assert env["FLEETWRIGHT_PROMETHEUS_CA_FILE"] == "/etc/fleetwright/prometheus/ca.crt"
            assert "FLEETWRIGHT_PROMETHEUS_BEARER_TOKEN_FILE" not in env
        else:
            assert "prom-auth" not in secrets, name
