"""Classification of Kubernetes API failures into the retryable/permanent taxonomy.

Every adapter call goes through ``classified`` so callers see only ``fleetwright.errors`` types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from fleetwright.errors import (
    FleetwrightError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    RetryableError,
)

# Throttling, conflicts (optimistic concurrency) and server-side trouble heal with time.
_RETRYABLE_STATUS = {409, 429, 500, 502, 503, 504}


def api_message(error: ApiException) -> str:
    """The apiserver's own message from a Status body, falling back to the reason."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        body = {}
    return str(body.get("message") or error.reason or "unknown error")


def classify(
    error: ApiException, what: str, not_found: type[NotFoundError] = NotFoundError
) -> FleetwrightError:
    status = int(error.status or 0)
    message = f"{what}: {api_message(error)} (HTTP {status})"
    if status == 403:
        return ForbiddenError(message)
    if status == 404:
        return not_found(message)
    if status in _RETRYABLE_STATUS or status == 0:
        return RetryableError(
            message, reason="ApiUnavailable" if status >= 500 or status == 0 else "ApiRetry"
        )
    return PermanentError(message, reason="ApiRejected")


@contextmanager
def classified(what: str, *, not_found: type[NotFoundError] = NotFoundError) -> Iterator[None]:
    """Translate Kubernetes client failures inside the block into the error taxonomy. Calls about
    one Node pass ``not_found=NodeGoneError``: their 404 means the node left the fleet."""
    try:
        yield
    except ApiException as error:
        raise classify(error, what, not_found) from error
    except (Urllib3HTTPError, OSError) as error:
        raise RetryableError(f"{what}: API server unreachable: {error}", reason="ApiUnreachable") from error
