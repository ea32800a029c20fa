"""The ``fleetwright`` command line (also ``kubectl fleetwright``). Each command group lives in a
module named after it and registers itself on ``fleetwright.cli.app.app``."""
