"""Construction of Kubernetes API clients from a kubeconfig or a bearer token."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config

from fleetwright.errors import PermanentError


def from_kubeconfig(path: Path | str | None = None, *, context: str | None = None) -> client.ApiClient:
    """An API client for ``path`` (default: $KUBECONFIG or ~/.kube/config), or in-cluster config."""
    if path is None:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return client.ApiClient()
        except config.ConfigException:
            pass
    try:
        api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(path) if path else None, context=context
        )
    except (config.ConfigException, OSError) as error:
        source = path or "(default)"
        raise PermanentError(f"kubeconfig {source}: {error}", reason="InvalidKubeconfig") from error
    return api


def from_token(server: str, token: str, *, ca_cert: Path | str) -> client.ApiClient:
    """An API client authenticating with a bearer token (e.g. a ServiceAccount token)."""
    configuration = client.Configuration()
    configuration.host = server
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.ssl_ca_cert = str(ca_cert)
    return client.ApiClient(configuration)


# For type annotations outside the adapter, which must not import ``kubernetes`` itself.
ApiClient = client.ApiClient
