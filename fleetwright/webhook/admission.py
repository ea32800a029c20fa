"""fleetwright's admission webhooks as the API server registers them: the
ValidatingWebhookConfiguration of NodeProfiles, DeploymentPolicies and Campaigns
(``failurePolicy: Fail``) and the MutatingWebhookConfiguration that taints joining Nodes
(``failurePolicy: Ignore``, a short timeout: ``nodetaint`` says why), in cluster (a Service) or
out of it (a URL). What they answer is ``review``'s and ``nodetaint``'s, the HTTPS server
``server``'s.
"""

from __future__ import annotations

from typing import Any

from fleetwright.api.campaign import PLURAL as CAMPAIGN_PLURAL
from fleetwright.api.common import VERSION
from fleetwright.api.deploymentpolicy import PLURAL as POLICY_PLURAL
from fleetwright.api.keys import GROUP, NODE_WEBHOOK_NAME, WEBHOOK_NAME
from fleetwright.api.nodeprofile import PLURAL as PROFILE_PLURAL
from fleetwright.webhook.server import MUTATE_PATH, WEBHOOK_PATH

# A joining node's registration waits at most this long for the Node mutation (then it is ignored).
NODE_WEBHOOK_TIMEOUT_SECONDS = 5


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
                        "resources": [PROFILE_PLURAL, POLICY_PLURAL, CAMPAIGN_PLURAL],
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
    for long, nor fails because of it (see ``nodetaint``)."""
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
