"""Setting or removing one annotation on a cluster-scoped fleetwright custom object (a
NodeProfile's ``fleetwright.io/paused``, written by the operator CLI).

A merge patch touching only that key, so the annotation is durable intent that survives a re-apply
of the rest of the manifest and is visible to GitOps diffs. It must not write spec or status.
"""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client

from fleetwright.api.common import VERSION
from fleetwright.api.keys import GROUP
from fleetwright.kube.errors import classified


def annotate(api: client.ApiClient, plural: str, name: str, key: str, value: str | None) -> dict[str, Any]:
    """Set ``key`` to ``value`` (None removes it); returns the updated object."""
    custom = client.CustomObjectsApi(api)
    with classified(f"annotate {plural}.{GROUP}/{name}"):
        obj = cast(
            dict[str, Any],
            custom.patch_cluster_custom_object(
                GROUP,
                VERSION,
                plural,
                name,
                {"metadata": {"annotations": {key: value}}},
                _content_type="application/merge-patch+json",
            ),
        )
    return obj
