"""Reading a Secret's data: the public keys an image-signature policy names. Only the worker
calls it, in the package namespace, where it is granted ``get`` on Secrets (it can already run
privileged Jobs that mount any of them there). Values are returned decoded, never logged.
"""

from __future__ import annotations

import base64
import binascii

from kubernetes import client

from fleetwright.errors import InvalidSpecError
from fleetwright.kube.client import fetch_json
from fleetwright.kube.errors import classified


def secret_text(api: client.ApiClient, namespace: str, name: str) -> dict[str, str]:
    """key -> value (UTF-8) of every entry of Secret ``namespace/name``; 404 is ``NotFoundError``."""
    with classified(f"read secret {namespace}/{name}"):
        secret = fetch_json(client.CoreV1Api(api).read_namespaced_secret, name, namespace)
    entries = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            entries[key] = base64.b64decode(value, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise InvalidSpecError([(f"secret {namespace}/{name}[{key}]", "not UTF-8 text")]) from None
    return entries
