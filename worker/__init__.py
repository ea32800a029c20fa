"""The fleetwright process (installed as ``fleetwright.worker``): Temporal worker and controller."""
