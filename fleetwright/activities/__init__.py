"""Temporal activities (installed as ``fleetwright.activities``): thin, idempotent adapters over
``fleetwright.kube``. No retry loops here; errors are classified and Temporal retries."""
