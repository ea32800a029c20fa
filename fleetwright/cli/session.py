"""Where the operator commands reach the cluster and Temporal, and how they fail.

Owns the ``Target`` the global options build, the lazily made Kubernetes and Temporal clients,
``-o table|json|yaml`` output, and turning every failure into one line on stderr that names what was
unreachable and its address (never a traceback). It must not decide anything about a rollout.
Every command's ``--help`` imports it, so rich, pydantic and asyncio are imported only when a
command prints or runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from fleetwright.errors import FleetwrightError, NotFoundError, RetryableError
from fleetwright.process.defaults import TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console
    from temporalio.client import Client
    from temporalio.service import RPCError

    from fleetwright.cli.reports import Acted
    from fleetwright.kube.client import ApiClient

T = TypeVar("T")

EXIT_ERROR = 1
EXIT_USAGE = 2


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


class CliError(Exception):
    """A failure the operator can act on; printed as one line."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Target:
    """The global options: the cluster's kubeconfig and the Temporal frontend."""

    kubeconfig: Path | None = None
    temporal_address: str = TEMPORAL_ADDRESS
    temporal_namespace: str = TEMPORAL_NAMESPACE


@dataclass
class Session:
    """One command's connections, made on first use."""

    target: Target
    _api: ApiClient | None = field(default=None, init=False)
    _temporal: Client | None = field(default=None, init=False)

    @classmethod
    def of(cls, ctx: typer.Context) -> Session:
        target = ctx.find_root().obj
        return cls(target if isinstance(target, Target) else Target())

    @property
    def api(self) -> ApiClient:
        if self._api is None:
            from fleetwright.kube.client import from_kubeconfig

            try:
                self._api = from_kubeconfig(self.target.kubeconfig)
            except FleetwrightError as error:
                raise CliError(f"cannot load the kubeconfig: {error}") from error
        return self._api

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    async def temporal(self) -> Client:
        if self._temporal is None:
            from fleetwright.process.temporalclient import connect

            try:
                self._temporal = await connect(self.target.temporal_address, self.target.temporal_namespace)
            except RuntimeError as error:
                raise CliError(
                    f"cannot reach Temporal at {self.target.temporal_address} "
                    f"(namespace {self.target.temporal_namespace}): {_first_line(error)}"
                ) from error
        return self._temporal

    @contextmanager
    def failures(self) -> Iterator[None]:
        """Every failure inside becomes one line on stderr and a non-zero exit."""
        try:
            yield
        except CliError as error:
            fail(str(error), error.code)
        except RetryableError as error:
            if error.reason == "ApiUnreachable":
                fail(f"cannot reach the Kubernetes API server at {self.server}: {_first_line(error)}")
            fail(str(error))
        except FleetwrightError as error:
            fail(str(error))
        except Exception as error:
            if self._temporal is None:  # no client, so no Temporal failure to explain
                raise
            fail(self._temporal_failure(error))

    def _temporal_failure(self, error: Exception) -> str:
        """The line for a refused update or a failed call to Temporal; anything else re-raised."""
        from temporalio.client import WorkflowUpdateFailedError
        from temporalio.service import RPCError

        if isinstance(error, WorkflowUpdateFailedError):
            return f"refused: {_cause(error)}"
        if isinstance(error, RPCError):
            return self._rpc_message(error)
        raise error

    def _rpc_message(self, error: RPCError) -> str:
        from temporalio.service import RPCStatusCode

        where = f"Temporal at {self.target.temporal_address} (namespace {self.target.temporal_namespace})"
        if error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            return f"cannot reach {where}: {_first_line(error)}"
        return f"{where} answered: {_first_line(error)}"

    def run(self, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run an async step of a command under ``failures``."""
        import asyncio

        with self.failures():
            return asyncio.run(work())
        raise AssertionError("unreachable")  # failures() exits


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)


def not_found(what: str, error: NotFoundError) -> CliError:
    return CliError(f"{what} not found ({error})")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _cause(error: BaseException) -> str:
    cause: BaseException = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return _first_line(cause)


def check_output(value: str) -> Output:
    try:
        return Output(value)
    except ValueError:
        fail(f"-o/--output must be table, json or yaml, not {value!r}", EXIT_USAGE)


def emit(
    data: BaseModel | list[Any] | dict[str, Any], output: Output, table: Callable[[Console], None]
) -> None:
    """Print ``data`` as JSON or YAML, or call ``table`` to render it for a human."""
    if output is Output.TABLE:
        from fleetwright.cli.text import human_console

        table(human_console())
        return
    plain = _plain(data)
    if output is Output.JSON:
        typer.echo(json.dumps(plain, indent=2, sort_keys=False))
    else:
        import yaml

        typer.echo(yaml.safe_dump(plain, sort_keys=False).rstrip())


def print_acted(acted: Acted, output: str) -> None:
    """What a control command did: its one-line result, or ``acted`` as JSON or YAML."""
    emit(acted, check_output(output), lambda console: console.print(acted.result, highlight=False))


def _plain(data: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list):
        return [_plain(d) for d in data]
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    return data


OUTPUT_HELP = "Output format: table, json or yaml."
# The options every command shares, declared once so their flags and help agree.
OutputOpt = Annotated[str, typer.Option("-o", "--output", help=OUTPUT_HELP)]
NamespaceOpt = Annotated[str, typer.Option("--namespace", "-n", help="Namespace of the stage Jobs.")]
