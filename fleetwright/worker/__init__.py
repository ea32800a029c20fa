"""The Temporal worker process: hosts the rollout and node workflows and every Kubernetes activity
on the task queue, with the interceptor and traces operators read. Installed as
``fleetwright.worker``."""
