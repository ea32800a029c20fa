"""Entry point: imports every command module (each registers itself on the app) and runs it."""

from __future__ import annotations

from fleetwright.cli import (
    chaos,
    cluster,
    control,
    demo,
    history,
    logs,
    node,
    package,
    plan,
    serve,
    status,
    validate,
)
from fleetwright.cli.app import app
from fleetwright.worker.process import run_and_exit

# Command modules register on import; keep this list the one place that names them.
COMMAND_MODULES = (
    chaos,
    cluster,
    control,
    demo,
    history,
    logs,
    node,
    package,
    plan,
    serve,
    status,
    validate,
)


def main() -> None:
    """Every command ends through one exit (see ``fleetwright.worker.process``)."""
    run_and_exit(app)


if __name__ == "__main__":
    main()
