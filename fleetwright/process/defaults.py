"""Where a process and the CLI find Temporal unless told otherwise: the defaults of
``WorkerSettings.temporal_address`` and ``temporal_namespace``, kept apart from the settings model so
the CLI's ``--help`` shows them without importing pydantic and the engine's settings.

Owns these two values only."""

from __future__ import annotations

TEMPORAL_ADDRESS = "127.0.0.1:7233"
TEMPORAL_NAMESPACE = "default"
