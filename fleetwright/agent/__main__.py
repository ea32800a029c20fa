"""``python -m fleetwright.agent <mode> <host-root> <package-dir> [interrupt-data]``."""

from fleetwright.agent.cli import main

raise SystemExit(main())
