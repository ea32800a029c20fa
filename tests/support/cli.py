"""Running the ``fleetwright`` CLI in tests: in-process through typer's CliRunner (on a thread, since
the commands run their own event loop), pointed at the session's cluster and Temporal dev server
through the global options, exactly as an operator would."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner, Result

from fleetwright.cli import commands
from fleetwright.cli.app import app
from fleetwright.local.temporalserver import LocalTemporal
from tests.support.providers import ClusterUnderTest


@dataclass
class Cli:
    cluster: ClusterUnderTest
    temporal: LocalTemporal

    def globals(self) -> list[str]:
        return [
            "--kubeconfig",
            str(self.cluster.kubeconfig),
            "--temporal-address",
            self.temporal.address,
            "--temporal-namespace",
            self.temporal.namespace,
        ]

    def invoke(self, *args: str, input: str | None = None) -> Result:
        argv = [*self.globals(), *args]
        commands.load(argv)  # as the program does: the invoked command's module registers it
        return CliRunner().invoke(app, argv, input=input)

    async def run(self, *args: str, input: str | None = None) -> Result:
        return await asyncio.to_thread(self.invoke, *args, input=input)

    async def ok(self, *args: str) -> str:
        """stdout of a command that must succeed."""
        result = await self.run(*args)
        assert result.exit_code == 0, (
            f"fleetwright {' '.join(args)} exited {result.exit_code}: {result.output}"
        )
        return result.stdout

    async def json(self, *args: str) -> Any:
        return json.loads(await self.ok(*args, "-o", "json"))

    async def fails(self, *args: str) -> str:
        """The one-line error of a command that must fail (stderr)."""
        result = await self.run(*args)
        assert result.exit_code != 0, f"fleetwright {' '.join(args)} succeeded: {result.output}"
        assert "Traceback" not in result.output, result.output
        return result.stderr
