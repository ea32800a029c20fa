"""The Eviction API (policy/v1), with its answers turned into outcomes rather than exceptions.

A 429 carrying a ``DisruptionBudget`` cause is a PodDisruptionBudget refusal: a *wait* state whose
message (naming the budget and its arithmetic) is shown verbatim. A 429 without that cause is API
throttling. A 500 means several budgets select the pod: it can never succeed. 404 means the pod
is already gone, which is success. Accepted (201) means the pod is terminating, not gone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleetwright.kube.errors import api_message, classified


class EvictionResult(StrEnum):
    ACCEPTED = "Accepted"
    GONE = "Gone"
    BLOCKED_BY_PDB = "BlockedByPodDisruptionBudget"
    MULTIPLE_PDBS = "MultiplePodDisruptionBudgets"
    THROTTLED = "Throttled"
    NAMESPACE_TERMINATING = "NamespaceTerminating"


@dataclass(frozen=True)
class EvictionOutcome:
    namespace: str
    pod: str
    result: EvictionResult
    message: str = ""
    retry_after_seconds: int | None = None


def _causes(error: ApiException) -> list[tuple[str, str]]:
    """The Status causes as (reason, message) pairs; the PDB's name and arithmetic live here."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return []
    causes = (body.get("details") or {}).get("causes") or []
    return [(str(c.get("reason", "")), str(c.get("message", ""))) for c in causes]


def _retry_after(error: ApiException) -> int | None:
    value = (error.headers or {}).get("Retry-After")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def evict(
    api: client.ApiClient, namespace: str, pod: str, *, grace_period_seconds: int | None = None
) -> EvictionOutcome:
    """Ask the apiserver to evict one pod, honouring PodDisruptionBudgets."""
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=pod, namespace=namespace),
        delete_options=client.V1DeleteOptions(grace_period_seconds=grace_period_seconds)
        if grace_period_seconds is not None
        else None,
    )
    with classified(f"evict pod {namespace}/{pod}"):
        try:
            client.CoreV1Api(api).create_namespaced_pod_eviction(pod, namespace, body)
        except ApiException as error:
            outcome = _outcome_of_refusal(namespace, pod, error)
            if outcome is None:
                raise  # classified() maps it into the error taxonomy
            return outcome
    return EvictionOutcome(namespace, pod, EvictionResult.ACCEPTED)


def _outcome_of_refusal(namespace: str, pod: str, error: ApiException) -> EvictionOutcome | None:
    status, causes = int(error.status or 0), _causes(error)
    reasons = {reason for reason, _ in causes}
    # Verbatim: the top-level message plus each cause's (e.g. "The disruption budget X needs ...").
    message = "; ".join([api_message(error), *(m for _, m in causes if m)])
    if status == 404:
        return EvictionOutcome(namespace, pod, EvictionResult.GONE, message)
    if status == 429 and "DisruptionBudget" in reasons:
        return EvictionOutcome(namespace, pod, EvictionResult.BLOCKED_BY_PDB, message, _retry_after(error))
    if status == 429:
        return EvictionOutcome(namespace, pod, EvictionResult.THROTTLED, message, _retry_after(error))
    if status == 500 and "more than one PodDisruptionBudget" in message:
        return EvictionOutcome(namespace, pod, EvictionResult.MULTIPLE_PDBS, message)
    if status == 403 and "NamespaceTerminating" in reasons:
        return EvictionOutcome(namespace, pod, EvictionResult.NAMESPACE_TERMINATING, message)
    return None
