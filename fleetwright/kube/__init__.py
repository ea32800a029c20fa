"""The Kubernetes adapter: the only package that imports the ``kubernetes`` client.

It turns API calls into small idempotent operations and classifies every failure into the one
error taxonomy of ``fleetwright.errors``. It holds no retry loops; Temporal retry policies retry.
"""
