"""What every fleetwright process shares (the Temporal worker, the controller, the admission
webhook) and the CLI reads: the settings model, structured logs, the Prometheus metrics endpoint,
the Temporal client and where it finds Temporal, stopping on SIGTERM. It runs no process itself."""
