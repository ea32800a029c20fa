"""Temporal workflows (installed as ``fleetwright.workflows``): orchestration only, no I/O."""
