"""fleetwright: a Kubernetes-native package manager for the host layer of GPU node fleets.

Pure core: ``fleetwright.api`` (pydantic models, the one source of truth for CR schemas and
payloads) and ``fleetwright.planner`` (decisions as pure functions of data and ``now``).
Shell: ``fleetwright.kube`` (the only importer of the ``kubernetes`` client),
``fleetwright.activities``, ``fleetwright.workflows``, the processes (``fleetwright.worker``,
``fleetwright.controller``, ``fleetwright.webhook``, sharing ``fleetwright.process``) and
``fleetwright.cli``.
"""

__version__ = "0.2.0"
