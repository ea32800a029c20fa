"""The one error taxonomy: every failure is either retryable or permanent.

Activities raise these; ``fleetwright.activities.errors`` turns them into Temporal failures and
``fleetwright.workflows.retry`` bounds the retries of the retryable ones. A permanent
error is never retried (bad input, forbidden, a conflict only a human can resolve); a retryable
error is retried by Temporal with backoff, never by a loop inside the activity.
"""

from __future__ import annotations


class FleetwrightError(Exception):
    """Base class. ``reason`` is a short CamelCase word fit for a condition or a label."""

    reason: str = "Error"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason

    @property
    def message(self) -> str:
        return str(self)


class RetryableError(FleetwrightError):
    """A transient condition: the API server is unreachable, throttled, or a conflict on write."""

    reason = "Retryable"


class PermanentError(FleetwrightError):
    """Retrying cannot help: invalid input, a forbidden request, an object that must exist is gone."""

    reason = "Permanent"


class InvalidSpecError(PermanentError):
    """A spec failed validation. ``errors`` holds one ``(field path, message)`` per problem."""

    reason = "InvalidSpec"

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


class ForbiddenError(PermanentError):
    """The API server answered 403: RBAC does not allow the request."""

    reason = "Forbidden"


class NotFoundError(PermanentError):
    """An object the operation needs does not exist."""

    reason = "NotFound"


class NodeGoneError(NotFoundError):
    """The Node the operation is about no longer exists: work on it ends (it left the fleet), and
    writes that only show or undo our work on it are done already."""

    reason = "NodeGone"


class PrometheusUnavailableError(RetryableError):
    """Prometheus could not be reached, timed out or answered 5xx: a health check's measurement is
    an Error (counted toward its consecutiveErrorLimit), never a pass."""

    reason = "PrometheusUnavailable"


class QueryRejectedError(PermanentError):
    """Prometheus refused a health check's query (bad PromQL, a range result, unauthorised) or sent
    an answer that is not a query result."""

    reason = "QueryRejected"
