"""Turns the error taxonomy into Temporal failures: the one place retryability is decided.

``PermanentError`` becomes a non-retryable ``ApplicationError`` whose type is the error's reason
(``Forbidden``, ``NotFound``, ``InvalidSpec``, ...), so retry policies need no list of Python class
names; ``RetryableError`` becomes a retryable one. Everything else propagates unchanged.

The failure carries the error's message, not its chain of causes: an API server that does not
answer raises through urllib3's retries, and with every cause's stack trace the failure passes the
server's size limit, which replaces it with "Failure exceeds size limit." and no type, so neither
the Temporal UI nor ``fleetwright campaign status`` could say what failed. The message names the
call and the cause (``list nodes: API server unreachable: ...``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

from temporalio.exceptions import ApplicationError

from fleetwright.errors import FleetwrightError, PermanentError

F = TypeVar("F", bound=Callable[..., Any])


def to_application_error(error: FleetwrightError) -> ApplicationError:
    return ApplicationError(str(error), type=error.reason, non_retryable=isinstance(error, PermanentError))


def temporal_errors(function: F) -> F:
    """Decorate an activity (sync or async) so taxonomy errors leave it as ApplicationErrors."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await function(*args, **kwargs)
            except FleetwrightError as error:
                raise to_application_error(error) from None

        return cast(F, async_wrapper)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except FleetwrightError as error:
            raise to_application_error(error) from None

    return cast(F, wrapper)
