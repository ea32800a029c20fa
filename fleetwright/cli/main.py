"""Entry point: imports the command module the run invokes (``fleetwright.cli.commands``; every
module for the root help) and runs the app."""

from __future__ import annotations

import sys

from fleetwright.cli.app import app
from fleetwright.cli.commands import load
from fleetwright.process.shutdown import run_and_exit


def main() -> None:
    """Every command ends through one exit (see ``fleetwright.process.shutdown``)."""
    load(sys.argv[1:])
    run_and_exit(app)


if __name__ == "__main__":
    main()
