"""``python -m fleetwright.worker``: the worker process (settings from FLEETWRIGHT_* / a JSON file)."""

from fleetwright.worker.main import main

main()
